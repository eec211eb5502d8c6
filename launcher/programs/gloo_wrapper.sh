# shellcheck shell=sh
# Horovod over Gloo: every task runs this POSIX sh before the program (sh -c TEXT hvd-gloo ...).
# $1 = gloo_server.py, $2 = gloo_iface.py, $3 = the image's python (it runs Horovod's
# rendezvous server); the rest = the program and its arguments, any program.
server_code=$1
iface_code=$2
py=$3
shift 3
dir=${HVD_GLOO_DIR:-$PWD/.hvd-container}
file=$dir/gloo-${SLURM_JOB_ID}.${SLURM_STEP_ID}
iface=${HOROVOD_GLOO_IFACE:-}
if [ -z "$iface" ]; then
    iface=$("$py" -c "$iface_code")
fi
if [ -z "$iface" ]; then
    echo "hvd-container gloo: no network interface with an IPv4 address; set HOROVOD_GLOO_IFACE" >&2
    exit 1
fi
host=${SLURMD_NODENAME:-$(hostname)}
# the folder is the user's own, 0700, never a link: the address is read back from it
(umask 077; mkdir -p "$dir")
if [ -L "$dir" ] || [ ! -O "$dir" ]; then
    echo "hvd-container gloo: $dir is a link or another user's folder; remove it" >&2
    exit 1
fi
chmod 700 "$dir"
if [ "$SLURM_LOCALID" = 0 ]; then
    # the node's name for the rendezvous server, by its index in the step: no hostlist to parse
    (umask 077; mkdir -p "$file.nodes")
    printf '%s\n' "$host" >"$file.nodes/.$SLURM_NODEID.$$" && mv -f "$file.nodes/.$SLURM_NODEID.$$" "$file.nodes/$SLURM_NODEID"
fi
server=
if [ "$SLURM_PROCID" = 0 ]; then
    rm -f "$file"
    HVD_GLOO_IFACE=$iface HVD_GLOO_FILE=$file "$py" -c "$server_code" &
    server=$!
fi
i=0
while [ ! -s "$file" ]; do
    if [ -n "$server" ] && ! kill -0 "$server" 2>/dev/null; then
        # the server died before publishing: say so in the file, or every task waits 120 s
        wait "$server"
        echo "failed $?" >"$file.$$" && mv -f "$file.$$" "$file"
        break
    fi
    i=$((i + 1))
    if [ "$i" -gt 1200 ]; then
        echo "hvd-container gloo: no rendezvous address in $file after 120 s" >&2
        exit 1
    fi
    sleep 0.1
done
read -r addr port <"$file"
if [ "$addr" = failed ]; then
    echo "hvd-container gloo: Horovod's rendezvous server on task 0 exited with code $port before it started; see task 0's error" >&2
    exit 1
fi
export HOROVOD_GLOO_RENDEZVOUS_ADDR="$addr" HOROVOD_GLOO_RENDEZVOUS_PORT="$port"
export HOROVOD_CONTROLLER=gloo HOROVOD_CPU_OPERATIONS=gloo HOROVOD_GLOO_IFACE="$iface"
export HOROVOD_RANK="$SLURM_PROCID" HOROVOD_SIZE="$SLURM_STEP_NUM_TASKS"
export HOROVOD_LOCAL_RANK="$SLURM_LOCALID" HOROVOD_LOCAL_SIZE="${SLURM_STEP_TASKS_PER_NODE%%(*}"
export HOROVOD_CROSS_RANK="$SLURM_NODEID" HOROVOD_CROSS_SIZE="$SLURM_STEP_NUM_NODES"
export HOROVOD_HOSTNAME="$host"
if [ -z "$server" ]; then
    exec "$@"
fi
"$@"
rc=$?
kill "$server" 2>/dev/null
rm -rf "$file" "$file.nodes"
exit $rc
