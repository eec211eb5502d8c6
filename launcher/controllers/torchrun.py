"""torchrun under srun: one srun task per node, each running torchrun with the c10d rendezvous
on the first node of the step; torchrun starts the node's ranks and gives them their place.
For scripts that expect torchrun's environment, and for elastic restarts (`-e
PET_MAX_RESTARTS=3`: torchrun restarts the ranks of every node that many times).

torchrun reads each of its options from PET_<OPTION> when the command line does not give it,
so the wrapper that runs before the container sets them from the step: the number of nodes,
the processes per node (`--ntasks-per-node` or a node's GPUs), the rendezvous endpoint
(MASTER_ADDR:MASTER_PORT) and its ID (the job ID)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hvd_container.launcher.controllers import Shape, program_path
from hvd_container.launcher.controllers._torch import TorchController

if TYPE_CHECKING:
    from hvd_container.launcher.checks import Launch
    from hvd_container.launcher.request import LaunchRequest


class Torchrun(TorchController):
    name = "torchrun"
    about = "torchrun on each node (one srun task a node), c10d rendezvous on the first node; -e PET_MAX_RESTARTS=N for elastic restarts"
    own = ""
    task_env = (
        "MASTER_ADDR", "MASTER_PORT", "PET_NNODES", "PET_NPROC_PER_NODE", "PET_RDZV_BACKEND",
        "PET_RDZV_ENDPOINT", "PET_RDZV_ID", "PET_MAX_RESTARTS",
    )  # fmt: skip

    def shape(self, request: LaunchRequest, site_gpus: int) -> Shape:
        n, nodes, per_node = request.ntasks, request.nodes, request.ntasks_per_node
        procs = per_node or (math.ceil(n / nodes) if n and nodes else None) or max(site_gpus, 1)
        nodes = nodes or (math.ceil(n / procs) if n else 1)
        return Shape(None, nodes, 1, request.job_name, processes_per_node=procs)

    def exports(self, launch: Launch) -> str:
        procs = launch.layout.processes_per_node or 1
        return (
            f'export PET_NNODES="$SLURM_STEP_NUM_NODES" PET_NPROC_PER_NODE={procs} '
            'PET_RDZV_BACKEND=c10d PET_RDZV_ENDPOINT="$MASTER_ADDR:$MASTER_PORT" '
            'PET_RDZV_ID="$SLURM_JOB_ID" PET_MAX_RESTARTS="${PET_MAX_RESTARTS:-0}"'
        )

    def program(self, python: str, script: str, args: list[str]) -> list[str]:
        run = [python, "-m", "torch.distributed.run"]
        if script.endswith(".py"):
            return [*run, program_path(script), *args]
        return [*run, "--no-python", program_path(script), *args]
