"""A launch's memory: what a node's ranks get, decided once.

--mem or --mem-per-gpu as given; else nothing where the site's default gives a node's ranks
what a training rank needs (or all of the node); else, where the site's default would have the
ranks killed for memory (ZIH: 300 MB per CPU), the node's share for the GPUs asked for, with
the reason. The plan writes the option; the memory check (launcher/checks/registry.py) judges it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hvd_container.launcher.slurm import slurm_megabytes

if TYPE_CHECKING:
    from hvd_container.launcher.plan.layout import Layout
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.model import Memory, Site

# what one training rank holds on the host: a CUDA PyTorch rank's CUDA context, libraries and
# NCCL buffers are 3-5 GB before its data loader starts; below this a default is too small
RANK_NEEDS_MB = 8192


@dataclass(frozen=True)
class MemoryChoice:
    """The memory option a launch writes, and why where the tool chose it."""

    option: str  # --mem=... or --mem-per-gpu=..., whole
    why: str | None = None  # None: given on the command line


def node_ranks(layout: Layout) -> int:
    """The ranks on a node, as far as the layout tells (1 where it does not)."""
    return layout.node_ranks or layout.tasks_on_each_node or 1


def node_cpus(layout: Layout, cpus_per_task: int | None) -> int:
    """The CPUs a node's ranks ask for (Slurm's one a task where -c is not written)."""
    return (cpus_per_task or 1) * node_ranks(layout)


def memory_choice(
    site: Site,
    request: LaunchRequest,
    layout: Layout,
    partition: str | None,
    cpus_per_task: int | None,
) -> MemoryChoice | None:
    """The memory option of the launch's allocation (or of its step inside one), or None for
    Slurm's default."""
    if request.mem is not None:
        return MemoryChoice(f"--mem={request.mem}")
    if request.mem_per_gpu is not None:
        return MemoryChoice(f"--mem-per-gpu={request.mem_per_gpu}")
    memory, key = site.scheduler.memory_for(partition)
    if request.inside_allocation or memory is None or not memory.requests:
        return None
    ranks, cpus = node_ranks(layout), node_cpus(layout, cpus_per_task)
    given = default_megabytes(memory, layout.gpus_per_node, cpus)
    if given is None or given >= ranks * RANK_NEEDS_MB:
        return None
    plural = "s" if ranks > 1 else ""
    said = (
        f"site {site.name}'s default ({key}: {_default_words(memory)}) gives the {ranks} "
        f"rank{plural} of a node {given}M, {given // ranks}M a rank, less than the "
        f"{RANK_NEEDS_MB}M a training rank needs"
    )
    share = node_share(site, memory, partition, layout.gpus_per_node, cpus)
    if share is not None:
        megabytes, of_what = share
        if megabytes <= given:  # asking for the share would lower what the default gives
            return None
        return MemoryChoice(f"--mem={megabytes}M", f"{said}: the node's share {of_what}")
    return MemoryChoice(
        f"--mem={ranks * RANK_NEEDS_MB}M", f"{said}: that much a rank ({key}.per_node unknown)"
    )


def default_megabytes(memory: Memory, gpus: int, cpus: int) -> int | None:
    """What a node's part of a job gets without a memory request; None where all of the node
    or not known."""
    if memory.whole_node:
        return None
    if memory.default_per_gpu is not None and gpus:
        return slurm_megabytes(memory.default_per_gpu) * gpus
    if memory.default_per_cpu is not None:
        return slurm_megabytes(memory.default_per_cpu) * cpus
    return None


def node_share(
    site: Site, memory: Memory, partition: str | None, gpus: int, cpus: int
) -> tuple[int, str] | None:
    """(megabytes, of what) of a node's memory in the part the job asks for of the node: its
    GPUs' share, else its CPUs'; None where the node's memory or its count is not known."""
    if memory.per_node is None:
        return None
    node = slurm_megabytes(memory.per_node)
    site_gpus = site.gpus_per_node(partition)
    if gpus and site_gpus:
        return node * gpus // site_gpus, f"for {gpus} of its {site_gpus} GPUs ({memory.per_node})"
    info = site.scheduler.partition_info(partition)
    node_cpus = (info.cpus_per_node if info else None) or site.scheduler.cpus_per_node
    if node_cpus:
        used = min(cpus, node_cpus)
        return node * used // node_cpus, f"for {used} of its {node_cpus} CPUs ({memory.per_node})"
    return None


def _default_words(memory: Memory) -> str:
    if memory.default_per_gpu is not None:
        return f"{memory.default_per_gpu} per GPU"
    return f"{memory.default_per_cpu} per CPU"


def node_megabytes(choice: MemoryChoice, gpus: int) -> int | None:
    """What `choice` asks for on one node, in megabytes; None for all of it (--mem=0)."""
    name, _, value = choice.option.partition("=")
    megabytes = slurm_megabytes(value)
    if name == "--mem-per-gpu":
        return megabytes * max(gpus, 1)
    return megabytes or None
