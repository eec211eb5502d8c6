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

from hvd_container.core.errors import UserError

if TYPE_CHECKING:
    from hvd_container.launcher.plan.launch import Launch
    from hvd_container.launcher.plan.request import LaunchRequest


def _uneven(n: int, nodes: int, procs: int, site_gpus: int) -> str:
    """Why -n does not split into equal nodes, with the layouts nearest to it that do."""
    fits = [(nodes, n // nodes), (nodes, procs)] if n // nodes else [(nodes, procs)]
    if site_gpus:
        fits.append((math.ceil(n / site_gpus), site_gpus))
    said = " or ".join(
        dict.fromkeys(f"-N {a} --ntasks-per-node {b} ({a * b} ranks)" for a, b in fits if b > 0)
    )
    return (
        f"-n {n}: --controller torchrun starts the same number of ranks on each node, and {n} "
        f"ranks do not split evenly over {nodes} nodes; use {said}, or --controller torch "
        "(one task a rank, any -n)"
    )


class Torchrun(TorchController):
    name = "torchrun"
    about = "torchrun on each node (one srun task a node), c10d rendezvous on the first node; -e PET_MAX_RESTARTS=N for elastic restarts"
    own = ""
    task_env = (
        "MASTER_ADDR", "MASTER_PORT", "PET_NNODES", "PET_NPROC_PER_NODE", "PET_RDZV_BACKEND",
        "PET_RDZV_ENDPOINT", "PET_RDZV_ID", "PET_MAX_RESTARTS",
    )  # fmt: skip

    def shape(self, request: LaunchRequest, site_gpus: int) -> Shape:
        """The same ranks on every node, -n of them in all: -n alone spreads like --controller
        torch (a node's GPUs a node, one node on CPU nodes); a world -n cannot make evenly is
        refused with the nearest layouts that can."""
        n, nodes, per_node = request.ntasks, request.nodes, request.ntasks_per_node
        if n is None:
            procs = per_node or max(site_gpus, 1)
            return Shape(None, nodes or 1, 1, request.job_name, processes_per_node=procs)
        if nodes is None and per_node is not None:
            nodes = math.ceil(n / per_node)
        elif nodes is None:
            nodes = math.ceil(n / site_gpus) if site_gpus and not request.inside_allocation else 1
        procs = per_node or math.ceil(n / nodes)
        if nodes * procs != n:
            raise UserError(_uneven(n, nodes, procs, site_gpus))
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
