"""torch.distributed under srun: one srun task per rank, each given its place the way torchrun
would give it (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so
that `init_process_group()` finds the others through the env:// rendezvous. One rank per GPU,
as with Horovod; the script picks its GPU with LOCAL_RANK."""

from __future__ import annotations

from hvd_container.launcher.controllers._torch import SMOKE, TorchController


class Torch(TorchController):
    name = "torch"
    about = "torch.distributed (DDP, FSDP): one srun task per rank, RANK/WORLD_SIZE/LOCAL_RANK and MASTER_ADDR/PORT set for init_process_group"
    own = (
        'export RANK="$SLURM_PROCID" WORLD_SIZE="$SLURM_STEP_NUM_TASKS" '
        'LOCAL_RANK="$SLURM_LOCALID" LOCAL_WORLD_SIZE="$here" GROUP_RANK="$SLURM_NODEID"'
    )
    smoke = SMOKE
    task_env = (
        "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
    )  # fmt: skip
