#!/bin/bash
#SBATCH --job-name=train
#SBATCH --nodes=4
#SBATCH --ntasks=16
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=72
#SBATCH --partition=booster
#SBATCH --account=proj
#SBATCH --time=12:00:00
#SBATCH --output=%x_%j.out
#SBATCH --error=%x_%j.err
#SBATCH --no-requeue
# hvd-container: site jupiter, runtime apptainer
# controller torch (asked for with --controller)

export NCCL_SOCKET_IFNAME=ib0
export GLOO_SOCKET_IFNAME=ib0

# the job; the helper programs it runs (hvd_torch_step_setup, hvd_torch_rendezvous)
# and the files it reads are written at the end of this script, before the job runs
hvd_run_job() {
    sh -c "$hvd_torch_step_setup" hvd-torch i \
        srun --mpi=none --kill-on-bad-exit=1 -N 4 -n 16 --cpus-per-task=72 \
        sh -c "$hvd_torch_rendezvous" hvd-torch i \
        'export RANK="$SLURM_PROCID" WORLD_SIZE="$SLURM_STEP_NUM_TASKS" LOCAL_RANK="$SLURM_LOCALID" LOCAL_WORLD_SIZE="$here" GROUP_RANK="$SLURM_NODEID"' \
        apptainer exec --nv ddp-arm64.sif python train.py
}

# ---- written by hvd-container for the job above: its helper programs and files ----

# torch_step_setup.sh, run by the srun line
IFS= read -r -d '' hvd_torch_step_setup <<'HVD_PROGRAM_END' || :
suffix=$1; shift;
if [ -z "${MASTER_ADDR:-}" ] && [ -n "${SLURM_JOB_NODELIST:-}" ]; then
    only=; skip=;
    for word in "$@"; do
        case $word in
        srun | [0-9]*) ;;
        --nodelist=*) only=${word#--nodelist=} ;;
        -w?*) only=${word#-w} ;;
        --exclude=*) skip=${skip:+$skip,}${word#--exclude=} ;;
        -x?*) skip=${skip:+$skip,}${word#-x} ;;
        -*) ;;
        *) break ;;
        esac;
    done;
    skipped=" "; [ -z "$skip" ] || skipped=" $(scontrol show hostnames "$skip" 2>/dev/null | tr '\n' ' ')";
    named=" "; [ -z "$only" ] || named=" $(scontrol show hostnames "$only" 2>/dev/null | tr '\n' ' ')";
    MASTER_ADDR=;
    # in the job's order, which is the order of the step's node ids (rank 0 on the first)
    for node in $(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null); do
        case $skipped in *" $node "*) continue ;; esac;
        case $named in " ") ;; *" $node "*) ;; *) continue ;; esac;
        MASTER_ADDR=$node; break;
    done;
    # the suffix only where that name resolves here: the plain name, and which one, otherwise
    if [ -n "$MASTER_ADDR" ] && [ -n "$suffix" ]; then
        if getent hosts "$MASTER_ADDR$suffix" >/dev/null 2>&1; then MASTER_ADDR="$MASTER_ADDR$suffix";
        else echo "hvd-container torch: $MASTER_ADDR$suffix (the first node with the site's first_node_suffix $suffix) does not resolve on $(hostname): the rendezvous is $MASTER_ADDR" >&2; fi;
    fi;
    [ -z "$MASTER_ADDR" ] || export MASTER_ADDR;
fi;
exec "$@"
HVD_PROGRAM_END

# torch_rendezvous.sh, run by the srun line
IFS= read -r -d '' hvd_torch_rendezvous <<'HVD_PROGRAM_END' || :
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
HVD_PROGRAM_END

hvd_run_job
