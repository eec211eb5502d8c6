#!/bin/sh
# A real multi-node Slurm cluster on one machine, for tests and CI.
#
#   testbed/slurm.sh up [--nodes N]   install slurm-wlm/munge/libpmix-dev when absent, start
#                     the cluster with N nodes (default 2; a running cluster of another size
#                     restarts with N)
#   testbed/slurm.sh down     stop only what `up` started, remove its namespaces and bridge
#   testbed/slurm.sh status   daemons and node states; exit 0 only when every node is usable
#   testbed/slurm.sh crash NODE   the node goes away as a crashed machine does: every process in
#                     its namespace (slurmd, slurmstepd, the tasks) is SIGKILLed; Slurm counts it
#                     down after SlurmdTimeout, and `up` brings it back
#   testbed/slurm.sh slow NODE RATE   the node's link is slowed to RATE (tc's units: 50mbit)
#                     both ways, with a token bucket (tbf: this kernel has no netem)
#   testbed/slurm.sh break-runtime NODE   the node's container path breaks: its slurmd runs
#                     again in a mount namespace of its own where ch-run is /bin/false
#   testbed/slurm.sh mend NODE   undoes slow and break-runtime
#
# Each node is a network namespace with its own hostname and address (veth pair to a host
# bridge); one slurmd per node, slurmctld on the host at the bridge address, munge shared.
# The namespaces share the host's filesystem, so the caller's working directory is visible on
# every node.  Jobs run as root or as any user with a passwd entry.
#
# Settings (environment):
#   HVD_SLURM_NODES   number of nodes (default 2)
#   HVD_SLURM_CPUS    CPUs each node declares (default 4; config_overrides lets this exceed
#                     the machine's real core count)
#   HVD_SLURM_GPUS    GPUs each node declares, by count only (default 2; there are no devices)
#   HVD_SLURM_NET     first three octets of the private /24 (default 10.213.7)
#   HVD_SLURM_RUN     run dir: pid files, logs, per-node spool (default /run/hvd-testbed/slurm)
#   HVD_SLURM_TMPFS   per-node TmpFS parent, under /tmp so containers see it (default /tmp/hvd-slurm)
#   HVD_SLURM_STATE   slurmctld state (job ids keep counting across restarts)
#                     (default /var/lib/hvd-testbed/slurm)
set -eu

NODES=${HVD_SLURM_NODES:-2}
CPUS=${HVD_SLURM_CPUS:-4}
GPUS=${HVD_SLURM_GPUS:-2}
NET=${HVD_SLURM_NET:-10.213.7}
RUN=${HVD_SLURM_RUN:-/run/hvd-testbed/slurm}
STATE=${HVD_SLURM_STATE:-/var/lib/hvd-testbed/slurm}
# Slurm's TmpFS is where Open MPI over PMIx makes its session directory: it must be visible
# inside the container (MPI_Init fails in session_dir.c otherwise), so it lies under /tmp,
# which container runtimes bind from the host.
TMPFS=${HVD_SLURM_TMPFS:-/tmp/hvd-slurm}
BRIDGE=hvdslurm0
NS_PREFIX=hvdsn
CONF=/etc/slurm/slurm.conf
GRES_CONF=/etc/slurm/gres.conf
MARK="# managed by hvd-container testbed/slurm.sh"
CLUSTER=hvdlocal

. "$(dirname "$0")/_lib.sh"
log() { tb_log "$@"; }
die() { tb_die "$@"; }

[ "$(id -u)" = 0 ] || die "must run as root (it starts daemons and network namespaces)"

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

install_packages() {
    # libpmix-dev: Slurm's pmix plugin dlopens libpmix from it.
    tb_apt_install slurm-wlm munge libpmix-dev iproute2 util-linux iptables
}

write_conf() {
    # An empty file is what a full disk left of an earlier write: it is nobody's configuration.
    if [ -s "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        die "$CONF exists and was not written by this script; move it away first"
    fi
    host=$(hostname -s)
    tmp=$(mktemp "$CONF.XXXXXX")
    {
        echo "$MARK"
        echo "ClusterName=$CLUSTER"
        echo "SlurmctldHost=$host($NET.1)"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CryptoType=crypto/munge"
        echo "MpiDefault=none"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "SchedulerType=sched/backfill"
        echo "SlurmdParameters=config_overrides"
        echo "ReturnToService=2"
        # Finished jobs stay visible to scontrol/squeue for an hour (no accounting daemon here).
        echo "MinJobAge=3600"
        echo "KillWait=5"
        # A node whose slurmd stops answering is DOWN (its jobs NODE_FAIL) after 10 s, not 5 min:
        # the end-to-end suite makes a node go away mid-job.
        echo "SlurmdTimeout=10"
        echo "StateSaveLocation=$STATE"
        echo "SlurmctldPidFile=$RUN/slurmctld.pid"
        echo "SlurmctldLogFile=$RUN/log/slurmctld.log"
        echo "SlurmdPidFile=$RUN/slurmd-%n.pid"
        echo "SlurmdSpoolDir=$RUN/spool-%n"
        echo "SlurmdLogFile=$RUN/log/slurmd-%n.log"
        # A per-node TmpFS keeps PMIx job directories of different nodes apart.
        echo "TmpFS=$TMPFS/%n"
        # GPUs by count (gres.conf names empty files, no devices): there are none here, but
        # jobs can ask for them and `sites probe` reads them, as on a GPU cluster.
        echo "GresTypes=gpu"
        i=1
        while [ "$i" -le "$NODES" ]; do
            echo "NodeName=node$i NodeAddr=$NET.$((10 + i)) NodeHostname=node$i CPUs=$CPUS Gres=gpu:$GPUS State=UNKNOWN"
            i=$((i + 1))
        done
        # two partitions, as sites have them: a short one with its own time limit
        echo "PartitionName=gpu Nodes=node[1-$NODES] MaxTime=1:00:00 State=UP"
        echo "PartitionName=debug Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP"
    } >"$tmp" 2>/dev/null || true
    # Callers test this function (`write_conf && ...`), which switches `set -e` off inside it:
    # a write that failed (a full disk) must be caught here, or an empty file replaces the
    # configuration.
    if [ "$(tail -n 1 "$tmp" 2>/dev/null)" != "PartitionName=debug Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP" ]; then
        rm -f "$tmp"
        die "cannot write $CONF (is the disk full? df -h $(dirname "$CONF"))"
    fi
    chmod 644 "$tmp"
    # gres.conf: Slurm ignores a GPU without File= ("file-less GPU", the node goes INVAL), so
    # each names an empty regular file; no device is behind it, and jobs get no GPU
    gres_changed=0
    mkdir -p "$RUN/gpus"
    i=0
    while [ "$i" -lt "$GPUS" ]; do
        : >"$RUN/gpus/nvidia$i"
        i=$((i + 1))
    done
    gres_line="NodeName=node[1-$NODES] Name=gpu File=$RUN/gpus/nvidia[0-$((GPUS - 1))]"
    if [ "$(tail -n 1 "$GRES_CONF" 2>/dev/null)" != "$gres_line" ]; then
        printf '%s\n%s\n' "$MARK" "$gres_line" >"$GRES_CONF.tmp" && mv "$GRES_CONF.tmp" "$GRES_CONF"
        gres_changed=1
    fi
    if [ -f "$CONF" ] && cmp -s "$tmp" "$CONF" && [ "$gres_changed" = 0 ]; then
        rm -f "$tmp"
        return 1 # unchanged
    fi
    mv "$tmp" "$CONF"
    return 0
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0 # a munged is already serving; not ours to stop
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 755 /run/munge
    [ -f /etc/munge/munge.key ] || runuser -u munge -- mungekey --create >/dev/null
    runuser -u munge -- munged --pid-file=/run/munge/hvd-testbed-munged.pid
    i=0
    until munge -n 2>/dev/null | unmunge >/dev/null 2>&1; do
        i=$((i + 1))
        [ "$i" -lt 50 ] || die "munged did not start"
        sleep 0.1
    done
    touch "$RUN/munged.ours"
}

# $1 = -I / -D, then the rule (table and chain first): added once, or every copy removed
iptables_rule() {
    how=$1
    shift
    if [ "$how" = -I ]; then
        iptables -C "$@" 2>/dev/null || iptables -I "$@"
    else
        while iptables -D "$@" 2>/dev/null; do :; done
    fi
}

# The nodes talk to each other through the bridge, and reach the host's DNS server through the
# host (masqueraded), as a cluster's nodes reach the site's: without it each lookup /etc/hosts
# cannot answer (a reverse lookup, a name's IPv6 address) waited 10 s for a server out of reach,
# and init_process_group() did so twice (c10d looks up its peer's name).
iptables_rules() { # $1 = -I / -D
    for chain in DOCKER-USER FORWARD; do
        iptables -n -L "$chain" >/dev/null 2>&1 || continue
        iptables_rule "$1" "$chain" -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
        iptables_rule "$1" "$chain" -i "$BRIDGE" ! -o "$BRIDGE" -j ACCEPT
        iptables_rule "$1" "$chain" -o "$BRIDGE" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    done
    iptables_rule "$1" POSTROUTING -t nat -s "$NET.0/24" ! -o "$BRIDGE" -j MASQUERADE
    [ "$1" = -D ] || echo 1 >/proc/sys/net/ipv4/ip_forward
}

setup_network() {
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link add "$BRIDGE" type bridge
        ip addr add "$NET.1/24" dev "$BRIDGE"
    fi
    ip link set "$BRIDGE" up
    i=1
    while [ "$i" -le "$NODES" ]; do
        ns=$NS_PREFIX$i
        [ -e "/run/netns/$ns" ] || ip netns add "$ns"
        if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
            # A host end left from a namespace being torn down goes first.
            ip link delete "hvdsv$i" 2>/dev/null || true
            ip link add "hvdsv$i" type veth peer name eth0 netns "$ns"
            ip link set "hvdsv$i" master "$BRIDGE" up
            ip -n "$ns" addr add "$NET.$((10 + i))/24" dev eth0
        fi
        ip -n "$ns" link set lo up
        ip -n "$ns" link set eth0 up
        ip -n "$ns" route replace default via "$NET.1" 2>/dev/null || true
        i=$((i + 1))
    done
    hosts_entries
    # With dockerd running, bridged traffic meets its FORWARD drop policy: let this bridge through.
    iptables_rules -I 2>/dev/null || true
}

HOSTS_MARK="# hvd-testbed slurm.sh"

# Node names resolve on the host and in containers (ch-run binds the host's /etc/hosts), as
# on a real cluster: Lightning and torch.distributed look up the first node by name.
hosts_entries() {
    drop_hosts_entries
    i=1
    while [ "$i" -le "$NODES" ]; do
        echo "$NET.$((10 + i)) node$i $HOSTS_MARK" >>/etc/hosts
        i=$((i + 1))
    done
}

drop_hosts_entries() {
    grep -qF "$HOSTS_MARK" /etc/hosts 2>/dev/null || return 0
    kept=$(grep -vF "$HOSTS_MARK" /etc/hosts)
    # rewrite in place: /etc/hosts may be a bind mount that cannot be replaced by rename
    printf '%s\n' "$kept" >/etc/hosts
}

start_slurmd() { # $1 = node index
    i=$1
    pid_alive "$RUN/slurmd-node$i.pid" && return 0
    FRESH="$FRESH node$i"
    mkdir -p "$RUN/spool-node$i" "$TMPFS/node$i"
    chmod 1777 "$TMPFS/node$i"
    # `ip netns exec` remounts /sys and slurmd then finds no cgroup fs: enter only the net ns,
    # and give the node its own hostname in a new UTS namespace.
    nsenter --net="/run/netns/$NS_PREFIX$i" unshare --uts \
        sh -c "hostname node$i && exec slurmd -N node$i"
}

registered() { # $1 = node: its slurmd registered since this `up` began
    t=$(scontrol show node "$1" 2>/dev/null | sed -n 's/.*SlurmdStartTime=\([^ ]*\).*/\1/p')
    [ -n "$t" ] && [ "$t" != None ] && ! [ "$t" \< "$BEGIN" ]
}

wait_nodes() {
    tries=0 # not `i`: the callers' node index (sh variables are global)
    while :; do
        states=$(sinfo -h -N -o '%N %T' 2>/dev/null || true)
        # Nodes that an earlier run left DOWN or DRAINED (saved state, e.g. "SlurmdSpoolDir is
        # full") come back once their slurmd answers.
        if echo "$states" | grep -qE ' (down|drain)'; then
            scontrol update nodename="node[1-$NODES]" state=resume 2>/dev/null || true
        fi
        if [ -n "$states" ] && ! echo "$states" | grep -qvE ' (idle|mixed|allocated|completing)$' &&
            [ "$(echo "$states" | wc -l)" -ge "$NODES" ]; then
            all=1
            for n in $FRESH; do registered "$n" || all=0; done
            [ "$all" = 1 ] && return 0
        fi
        tries=$((tries + 1))
        if [ "$tries" -ge 300 ]; then
            log "nodes not ready:"
            echo "$states" >&2
            die "see $RUN/log/"
        fi
        sleep 0.1
    done
}

# One node back after its slurmd restarted (`mend`, `break-runtime`): the others may be down on
# purpose (a test crashed one) and are not waited for.
wait_node() { # $1 = node
    tries=0
    while :; do
        state=$(sinfo -h -N -n "$1" -o '%T' 2>/dev/null | sort -u)
        case $state in
        down* | drain*) scontrol update nodename="$1" state=resume 2>/dev/null || true ;;
        idle | mixed | allocated | completing) registered "$1" && return 0 ;;
        esac
        tries=$((tries + 1))
        [ "$tries" -lt 300 ] || die "$1 not ready (${state:-no state}): see $RUN/log/"
        sleep 0.1
    done
}

cmd_up() {
    install_packages
    mkdir -p "$RUN/log" "$STATE"
    BEGIN=$(date +%Y-%m-%dT%H:%M:%S)
    FRESH=""
    changed=0
    write_conf && changed=1
    start_munge
    setup_network
    if [ "$changed" = 1 ] && pid_alive "$RUN/slurmctld.pid"; then
        log "configuration changed: restarting the cluster"
        stop_daemons
    fi
    pid_alive "$RUN/slurmctld.pid" || slurmctld
    i=1
    while [ "$i" -le "$NODES" ]; do
        start_slurmd "$i"
        i=$((i + 1))
    done
    wait_nodes
    log "up: $NODES nodes (node1..node$NODES), $GPUS GPUs each (by count), partitions debug and gpu; logs in $RUN/log"
}

kill_pidfile() { # $1 = pid file, $2 = program name: stops it only if the pid is still that program
    if tb_pid_alive "$1" "$2"; then tb_stop_pid "$1" "$2" 2>/dev/null; else rm -f "$1"; fi
}

stop_daemons() {
    set --
    for f in "$RUN"/slurmd-*.pid; do
        [ -e "$f" ] && set -- "$@" "$f" slurmd
    done
    [ -e "$RUN/slurmctld.pid" ] && set -- "$@" "$RUN/slurmctld.pid" slurmctld
    tb_stop_pids "$@"
}

cmd_down() {
    [ -d "$RUN" ] || { log "not running"; return 0; }
    stop_daemons
    if [ -f "$RUN/munged.ours" ]; then
        kill_pidfile /run/munge/hvd-testbed-munged.pid munged
        rm -f "$RUN/munged.ours"
    fi
    iptables_rules -D 2>/dev/null || true
    drop_hosts_entries
    for ns in /run/netns/$NS_PREFIX*; do
        [ -e "$ns" ] || continue
        ip link delete "hvdsv${ns##*/$NS_PREFIX}" 2>/dev/null || true
        ip netns delete "${ns##*/}"
    done
    ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
    log "down"
}

cmd_status() {
    ok=0
    if pid_alive "$RUN/slurmctld.pid"; then echo "slurmctld: running"; else echo "slurmctld: stopped"; ok=3; fi
    for f in "$RUN"/slurmd-*.pid; do
        [ -e "$f" ] || continue
        n=${f##*/slurmd-}
        if pid_alive "$f"; then echo "slurmd ${n%.pid}: running"; else echo "slurmd ${n%.pid}: stopped"; ok=3; fi
    done
    [ "$ok" = 0 ] && sinfo -N -o '%N %T %c' || true
    return "$ok"
}

cmd_crash() { # $1 = node name
    case "$1" in
    node[1-9] | node[1-9][0-9]) ;;
    *) die "crash: a node name such as node2, not '$1'" ;;
    esac
    ns="$NS_PREFIX${1#node}"
    [ -e "/run/netns/$ns" ] || die "crash: $1 has no namespace (is the cluster up?)"
    pids=$(ip netns pids "$ns")
    # shellcheck disable=SC2086 # one word per pid
    [ -z "$pids" ] || kill -9 $pids
    log "$1 crashed (killed: $(echo $pids | wc -w) processes)"
}

node_index() { # $1 = node name -> its index, or dies
    case "$1" in
    node[1-9] | node[1-9][0-9]) ;;
    *) die "a node name such as node2, not '$1'" ;;
    esac
    [ -e "/run/netns/$NS_PREFIX${1#node}" ] || die "$1 has no namespace (is the cluster up?)"
    echo "${1#node}"
}

# The node's index is read once, before anything that is called: sh variables are global, and
# a counter of a called function once turned `slurmd -N node4` in node4's namespace into
# `-N node3`, which took node3's name (and gave node3's jobs node4's broken ch-run).
restart_slurmd() { # $1 = node index, $2 = what runs before slurmd in the node's shell
    restarted=node$1 netns="/run/netns/$NS_PREFIX$1"
    kill_pidfile "$RUN/slurmd-$restarted.pid" slurmd
    BEGIN=$(date +%Y-%m-%dT%H:%M:%S)
    nsenter --net="$netns" unshare --uts --mount --propagation private \
        sh -c "$2 hostname $restarted && exec slurmd -N $restarted"
    wait_node "$restarted"
}

cmd_slow() { # $1 = node, $2 = rate
    i=$(node_index "$1")
    case "${2:-}" in
    [1-9]*bit) ;;
    *) die "slow: a rate such as 50mbit, not '${2:-}'" ;;
    esac
    tc qdisc replace dev "hvdsv$i" root tbf rate "$2" burst 1mb latency 100ms
    nsenter --net="/run/netns/$NS_PREFIX$i" tc qdisc replace dev eth0 root tbf rate "$2" burst 1mb latency 100ms
    log "$1: link slowed to $2 both ways"
}

cmd_break_runtime() { # $1 = node
    i=$(node_index "$1")
    chrun=$(command -v ch-run) || die "break-runtime: ch-run is not installed"
    touch "$RUN/broken-node$i" # first: restart_slurmd's callees count in variables of their own
    restart_slurmd "$i" "mount --bind /bin/false $chrun &&"
    log "$1: ch-run is /bin/false for its jobs"
}

cmd_mend() { # $1 = node
    i=$(node_index "$1")
    tc qdisc del dev "hvdsv$i" root 2>/dev/null || true
    nsenter --net="/run/netns/$NS_PREFIX$i" tc qdisc del dev eth0 root 2>/dev/null || true
    if [ -e "$RUN/broken-node$i" ]; then
        rm -f "$RUN/broken-node$i"
        restart_slurmd "$i" ""
    fi
    log "$1: mended"
}

case "${1:-}" in
crash) cmd_crash "${2:-}" ;;
slow) cmd_slow "${2:-}" "${3:-}" ;;
break-runtime) cmd_break_runtime "${2:-}" ;;
mend) cmd_mend "${2:-}" ;;
up)
    if [ "${2:-}" = "--nodes" ]; then
        case "${3:-}" in
        [1-9] | [1-9][0-9]) NODES=$3 ;;
        *) die "--nodes: a number of nodes from 1 to 99, not '${3:-}'" ;;
        esac
    elif [ -n "${2:-}" ]; then
        die "unknown option '$2' (allowed: --nodes N)"
    fi
    cmd_up
    ;;
down) cmd_down ;;
status) cmd_status ;;
*)
    echo "usage: $0 up|down|status|crash NODE|slow NODE RATE|break-runtime NODE|mend NODE" >&2
    exit 2
    ;;
esac
