# shellcheck shell=sh
# shellcheck disable=SC2034  # `here` is read by the exports in $1 (eval "$own")
# torch's controllers, on each task's node before the runtime: $1 = the controller's own exports
# (constant sh text), the rest = the runtime's command. Without MASTER_ADDR, the first node of
# the step; MASTER_PORT from the job and step IDs; `here` = this node's tasks, read from
# SLURM_STEP_TASKS_PER_NODE ("2(x3),1": counts per node in SLURM_NODEID order). A batch script
# writes it once and names it on its srun line.
own=$1; shift; nodes=${SLURM_STEP_NODELIST:-${SLURM_JOB_NODELIST:-}};
[ -n "${MASTER_ADDR:-}" ] || MASTER_ADDR=$(scontrol show hostnames "$nodes" 2>/dev/null | head -n 1);
if [ -z "$MASTER_ADDR" ]; then
    echo "hvd-container torch: no first node: scontrol show hostnames $nodes gave nothing on $(hostname) (is this inside a Slurm step?)" >&2; exit 1;
fi;
MASTER_PORT=${MASTER_PORT:-$((20000 + (SLURM_JOB_ID % 2000) * 16 + ${SLURM_STEP_ID:-0} % 16))};
left=${SLURM_NODEID:-0}; rest=${SLURM_STEP_TASKS_PER_NODE:-1}; here=1;
while [ -n "$rest" ]; do
    item=${rest%%,*};
    if [ "$item" = "$rest" ]; then rest=; else rest=${rest#*,}; fi;
    times=1; case $item in *"(x"*) times=${item#*(x}; times=${times%)};; esac;
    if [ "$left" -lt "$times" ]; then here=${item%%(*}; break; fi; left=$((left - times));
done;
export MASTER_ADDR MASTER_PORT; eval "$own"; exec "$@"
