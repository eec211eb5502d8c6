"""How many nodes, ranks and GPUs a launch uses, from the request, the site's partition and the
controller's way of laying out tasks.

One rank per GPU is the default model (the controller may say otherwise: Lightning wants -N
and --ntasks-per-node): without an explicit layout a node's worth of GPUs gets a node's worth
of ranks, and `-n` alone outside an allocation gets enough nodes for that. A layout that
cannot be run (more GPUs than a node has) is a one-line error with the fix; more ranks than
GPUs on a node is a warning and more CPUs than a node gives is refused by a check (checks.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hvd_container.launcher.controllers import Controller
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.model import Site

from hvd_container.core.errors import UserError


@dataclass(frozen=True)
class Layout:
    """Nodes, tasks and GPUs of a launch, as srun/sbatch will be asked for them."""

    nodes: int | None
    ntasks: int | None
    ntasks_per_node: int | None
    gpus_per_node: int  # 0: request none
    gpu_bind_none: bool
    job_name: str | None
    crowded: str | None = None  # why more ranks than GPUs share a node, with the fix
    processes_per_node: int | None = None  # ranks a node's one task starts (torchrun)
    node_ranks: int | None = None  # the ranks on a node, where the layout says (not Slurm)

    @property
    def tasks(self) -> int:
        """srun's tasks (torchrun's: one a node)."""
        return self.ntasks or (self.nodes or 1) * (self.ntasks_per_node or 1)

    @property
    def tasks_on_each_node(self) -> int | None:
        """The tasks each node runs: --ntasks-per-node, or -n over -N where it divides (srun
        infers the tasks a node from both: -n 16 -N 8 normally runs 2 a node); None where no
        one figure holds."""
        if self.ntasks_per_node is not None:
            return self.ntasks_per_node
        if self.ntasks and self.nodes and self.ntasks % self.nodes == 0:
            return self.ntasks // self.nodes
        return None

    @property
    def ranks(self) -> int:
        """The job's ranks: one a task, or the processes torchrun starts in each."""
        return self.tasks * (self.processes_per_node or 1)

    def task_cpus(self, per_rank: int | None) -> int | None:
        """--cpus-per-task of a task: a rank's CPUs, times the ranks a node's one task starts
        (torchrun's task holds all of its node's ranks)."""
        return per_rank * (self.processes_per_node or 1) if per_rank else None

    @property
    def single_task(self) -> bool:
        if self.ntasks is not None:
            return self.ntasks == 1
        return (self.nodes or 1) == 1 and (self.ntasks_per_node or 1) == 1


def resolve_layout(
    site: Site, request: LaunchRequest, controller: Controller, partition: str | None
) -> Layout:
    """Nodes, ranks and GPUs for request on site (counts were checked by request.check)."""
    site_gpus = site.gpus_per_node(partition)
    shape = controller.shape(request, site_gpus)
    n, nodes, per_node = shape.ntasks, shape.nodes, shape.ntasks_per_node

    tasks_on_node = per_node or (math.ceil(n / nodes) if n and nodes else n) or 1
    if not request.inside_allocation and nodes is None and n is not None and site_gpus:
        # one rank per GPU: without -N Slurm packs ranks by CPUs and oversubscribes GPUs
        nodes = math.ceil(n / site_gpus)
        tasks_on_node = math.ceil(n / nodes)

    # the processes that use a node's GPUs: its tasks, or the ranks its one task starts
    users = shape.processes_per_node or tasks_on_node
    gpu_bind_none = False
    crowded = None
    if request.gpus_per_task is not None:
        # every rank would see only "GPU 0" (the gpus-per-task check says so): per node instead
        gpus = request.gpus_per_node or request.gpus_per_task * tasks_on_node
        gpu_bind_none = True
    elif request.gpus_per_node is not None:
        gpus = request.gpus_per_node
    else:
        gpus = min(site_gpus, users)
    if site.scheduler.gpu_request == "none" or site_gpus == 0:
        if request.gpus_per_node or request.gpus_per_task:
            raise UserError(
                f"--gpus-per-node/--gpus-per-task: site {site.name} has no GPUs (scheduler.gpus_per_node: 0)"
            )
        gpus = 0
    elif gpus > site_gpus:
        raise UserError(
            f"--gpus-per-node {gpus}: {_where(site, partition)} has {site_gpus} GPUs per node (allowed: 1..{site_gpus})"
        )
    elif request.gpus_per_node is None and (per_node is not None or nodes is not None):
        # like CPUs: more ranks than GPUs on a node is refused (set_device(local_rank) fails);
        # an explicit --gpus-per-node is the way to share GPUs on purpose
        crowded = _too_many_ranks(site, partition, site_gpus, users, n, nodes, per_node)
    # the CPUs these ranks ask of a node are judged by the cpus-per-node check
    layout_known = per_node is not None or nodes is not None
    return Layout(
        nodes, n, per_node, gpus, gpu_bind_none, shape.job_name, crowded,
        shape.processes_per_node, users if layout_known else None,
    )  # fmt: skip


def _where(site: Site, partition: str | None) -> str:
    return f"partition {partition}" if partition else f"site {site.name}"


def _too_many_ranks(
    site: Site,
    partition: str | None,
    site_gpus: int,
    tasks_on_node: int,
    n: int | None,
    nodes: int | None,
    per_node: int | None,
) -> str | None:
    """Why tasks_on_node ranks do not fit one per GPU on a node, with the fix; None if they do."""
    if tasks_on_node <= site_gpus:
        return None
    where = _where(site, partition)
    share = "or pass --gpus-per-node to share GPUs between ranks on purpose"
    said = f"--ntasks-per-node {per_node}" if per_node is not None else f"-n {n} on -N {nodes}"
    if per_node is not None:
        total = n or per_node * (nodes or 1)
        fix = f"-N {math.ceil(total / site_gpus)} --ntasks-per-node {site_gpus}"
    else:
        fix = f"-N {math.ceil((n or 0) / site_gpus)}"
    return f"{said} puts {tasks_on_node} ranks on a node but {where} has {site_gpus} GPUs per node: ranks beyond {site_gpus} share a GPU (one rank per GPU is what the examples expect); use {fix}, {share}"


def gpu_flags(style: str, gpus: int) -> list[str]:
    """The site's way of asking for GPUs per node."""
    if gpus <= 0 or style == "none":
        return []
    return [f"--gres=gpu:{gpus}"] if style == "gres" else [f"--gpus-per-node={gpus}"]


def with_spares(layout: Layout, spares: int | None) -> Layout:
    """The layout an allocation with `spares` nodes beyond the training's asks for: the same
    ranks on each node, on more nodes (the steps still ask for the training's)."""
    if not spares or layout.nodes is None:
        return layout
    nodes = layout.nodes + spares
    ntasks = layout.ntasks
    if ntasks is not None and ntasks % layout.nodes == 0:
        ntasks = ntasks // layout.nodes * nodes
    return replace(layout, nodes=nodes, ntasks=ntasks)


def allocation_tasks(layout: Layout, ranks_per_node_as: str) -> list[str]:
    """Nodes and tasks as the allocation (#SBATCH, salloc) asks for them. A site whose GPU jobs
    cannot use --ntasks-per-node (ZIH) gets --ntasks with --mincpus=ranks per node, the form
    its guide gives (mincpus x nodes = ntasks); the step's srun still says its layout."""
    nodes, ntasks, per_node = layout.nodes, layout.ntasks, layout.ntasks_per_node
    even = per_node or (ntasks // nodes if ntasks and nodes and ntasks % nodes == 0 else None)
    if (
        ranks_per_node_as == "mincpus"
        and layout.gpus_per_node
        and nodes is not None
        and even is not None
        and (ntasks is None or ntasks == nodes * even)
    ):
        return [f"--nodes={nodes}", f"--ntasks={nodes * even}", f"--mincpus={even}"]
    flags = (("--nodes", nodes), ("--ntasks", ntasks), ("--ntasks-per-node", per_node))
    return [f"{flag}={value}" for flag, value in flags if value is not None]


def layout_options(layout: Layout) -> list[str]:
    opts: list[str] = []
    if layout.nodes is not None:
        opts += ["-N", str(layout.nodes)]
    if layout.ntasks is not None:
        opts += ["-n", str(layout.ntasks)]
    if layout.ntasks_per_node is not None:
        opts.append(f"--ntasks-per-node={layout.ntasks_per_node}")
    return opts
