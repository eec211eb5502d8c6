"""torch.distributed under srun: one srun task per rank, each given its place the way torchrun
would give it (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so
that `init_process_group()` finds the others through the env:// rendezvous. One rank per GPU,
as with Horovod; the script picks its GPU with LOCAL_RANK."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.launcher.controllers import _scan
from hvd_container.launcher.controllers._torch import SMOKE, TorchController

if TYPE_CHECKING:
    from hvd_container.facts import ImageFacts


class Torch(TorchController):
    name = "torch"
    about = "torch.distributed (DDP, FSDP): one srun task per rank, RANK/WORLD_SIZE/LOCAL_RANK and MASTER_ADDR/PORT set for init_process_group"
    own = (
        'export RANK="$SLURM_PROCID" WORLD_SIZE="$SLURM_STEP_NUM_TASKS" '
        'LOCAL_RANK="$SLURM_LOCALID" LOCAL_WORLD_SIZE="$here" GROUP_RANK="$SLURM_NODEID"'
    )
    smoke = SMOKE

    @classmethod
    def detect(cls, script: _scan.Script, facts: ImageFacts | None) -> str | None:
        """A script written for torch.distributed (init_process_group, torchrun's variables,
        Accelerate, the transformers Trainer) that uses neither Horovod nor Lightning; torchrun
        is asked for by name (it runs one task per node)."""
        if script.shows(_scan.HOROVOD) or script.shows(_scan.LIGHTNING):
            return None
        return "" if script.shows(_scan.TORCH_DISTRIBUTED) else None

    task_env = (
        "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
    )  # fmt: skip
