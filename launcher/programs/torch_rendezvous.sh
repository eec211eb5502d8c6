# shellcheck shell=sh
# shellcheck disable=SC2034  # `here` is read by the exports in $2 (eval "$own")
# torch's controllers, on each task's node before the runtime: $1 = the site's suffix of the
# first node's name (JSC's `i`; often empty: used where that name resolves), $2 = the controller's own exports (constant sh
# text), the rest = the runtime's command. Without MASTER_ADDR, the first node of the step
# (with the suffix); MASTER_PORT from the job and step IDs; `here` = this node's tasks, read
# from SLURM_STEP_TASKS_PER_NODE ("2(x3),1": counts per node in SLURM_NODEID order). A batch
# script writes it once and names it on its srun line.
# The port is one of 20000-32767, below Linux's ephemeral ports (32768-60999 by default), where
# another program's outgoing connection could hold it; a node whose ip_local_port_range takes it
# in refuses to start, naming both. The step's first task on the first node checks that no
# socket holds the port there before rank 0 binds it (a socket in TIME_WAIT does not count:
# torch's store reuses the address).
suffix=$1; own=$2; shift 2; nodes=${SLURM_STEP_NODELIST:-${SLURM_JOB_NODELIST:-}}; first=;
[ -n "${MASTER_ADDR:-}" ] || { MASTER_ADDR=$(scontrol show hostnames "$nodes" 2>/dev/null | head -n 1); first=1; };
if [ -z "$MASTER_ADDR" ]; then
    echo "hvd-container torch: no first node: scontrol show hostnames $nodes gave nothing on $(hostname) (is this inside a Slurm step?)" >&2; exit 1;
fi;
# the suffix only where that name resolves here: the plain name, and which one, otherwise
if [ -n "$first" ] && [ -n "$suffix" ]; then
    if getent hosts "$MASTER_ADDR$suffix" >/dev/null 2>&1; then MASTER_ADDR="$MASTER_ADDR$suffix";
    else echo "hvd-container torch: $MASTER_ADDR$suffix (the first node with the site's first_node_suffix $suffix) does not resolve on $(hostname): the rendezvous is $MASTER_ADDR" >&2; fi;
fi;
chosen=; [ -n "${MASTER_PORT:-}" ] || { MASTER_PORT=$((20000 + (SLURM_JOB_ID % 798) * 16 + ${SLURM_STEP_ID:-0} % 16)); chosen=1; };
# (sysctl files answer one read whole: `read`, a byte at a time, would get the first digit)
ports=$(cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null) || ports="32768 60999";
low=${ports%%[!0-9]*}; high=${ports##*[!0-9]};
if [ "$MASTER_PORT" -ge "$low" ] && [ "$MASTER_PORT" -le "$high" ]; then
    if [ -n "$chosen" ]; then
        echo "hvd-container torch: MASTER_PORT $MASTER_PORT is in $(hostname)'s ephemeral ports $low-$high (net.ipv4.ip_local_port_range), where an outgoing connection can hold it: set one below $low with -e MASTER_PORT=N" >&2; exit 1;
    fi;
    echo "hvd-container torch: warning: MASTER_PORT $MASTER_PORT is in $(hostname)'s ephemeral ports $low-$high (net.ipv4.ip_local_port_range): an outgoing connection can hold it" >&2;
fi;
if [ "${SLURM_NODEID:-0}" = 0 ] && [ "${SLURM_LOCALID:-0}" = 0 ]; then
    held=$(printf '%04X' "$MASTER_PORT");
    if grep -qsE "^ *[0-9]+: [0-9A-F]+:$held [0-9A-F]+:[0-9A-F]+ (0[1-58-9AB]) " /proc/net/tcp /proc/net/tcp6; then
        echo "hvd-container torch: MASTER_PORT $MASTER_PORT is taken on $(hostname) (\`ss -tanp sport = :$MASTER_PORT\` names the program): set another with -e MASTER_PORT=N" >&2; exit 1;
    fi;
fi;
left=${SLURM_NODEID:-0}; rest=${SLURM_STEP_TASKS_PER_NODE:-1}; here=1;
while [ -n "$rest" ]; do
    item=${rest%%,*};
    if [ "$item" = "$rest" ]; then rest=; else rest=${rest#*,}; fi;
    times=1; case $item in *"(x"*) times=${item#*(x}; times=${times%)};; esac;
    if [ "$left" -lt "$times" ]; then here=${item%%(*}; break; fi; left=$((left - times));
done;
export MASTER_ADDR MASTER_PORT; eval "$own"; exec "$@"
