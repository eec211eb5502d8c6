# shellcheck shell=sh
# torch's controllers, around the srun line where the job's node list is known (a batch script,
# inside salloc): the first node for every task of the step, also for runtimes whose tasks
# start inside the container, where there is no scontrol (Pyxis). Run as
# `sh -c TEXT hvd-NAME SUFFIX srun ...`: SUFFIX (the site's, often empty) follows the node's name.
suffix=$1; shift;
if [ -z "${MASTER_ADDR:-}" ] && [ -n "${SLURM_JOB_NODELIST:-}" ]; then
    MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | head -n 1);
    [ -z "$MASTER_ADDR" ] || export MASTER_ADDR="$MASTER_ADDR$suffix";
fi;
exec "$@"
