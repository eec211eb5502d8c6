"""The launch as planned, before anything runs: what every check looks at and what the plan
composes. Data only: the checks (launcher/checks/registry.py) and the plan (launcher/plan/planner.py) read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from hvd_container.launcher.controllers import Controller
    from hvd_container.launcher.plan.binds import Bind
    from hvd_container.launcher.plan.layout import Layout
    from hvd_container.launcher.plan.memory import MemoryChoice
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.plan.scheduler_values import SchedulerValues
    from hvd_container.launcher.plan.signature import ImageSignature
    from hvd_container.launcher.runtimes import Runtime
    from hvd_container.launcher.sites.machine import ThisMachine
    from hvd_container.launcher.sites.model import Site

    from hvd_container.facts import ImageFacts

Mode = Literal["run", "batch", "jupyter", "smoke"]


@dataclass(frozen=True)
class Launch:
    """A launch as planned, before anything runs: what every check looks at."""

    site: Site
    request: LaunchRequest
    mode: Mode
    runtime: Runtime
    controller: Controller
    layout: Layout
    scheduled: SchedulerValues  # partition, account, QOS, constraint, time: as written
    image: str | None  # as named (--image, or the site's template for --recipe)
    image_origin: str  # where that name came from, for messages
    image_unreadable: str | None  # why the image's file could not be read, if it could not
    facts: ImageFacts | None
    signature: ImageSignature | None  # its signature as checked; None: nobody asked
    env: dict[str, str]  # what the job's environment gets: the site's, then the request's
    binds: tuple[Bind, ...]  # the site's, then --bind's: parsed once, here
    mpi: str | None  # srun's --mpi plugin
    cpus_per_task: int | None  # a rank's CPUs as written: -c, else the site's within its cap
    memory: MemoryChoice | None  # the memory option written: --mem as given, else the site's need
    dry_run: bool  # nothing is prepared, asked or run
    judged_here: bool  # the launch starts from this machine (not a script for elsewhere)
    machine: ThisMachine | None  # None: this machine is not asked

    @property
    def partition(self) -> str | None:
        return self.scheduled.partition

    @property
    def gpus(self) -> int:
        return self.layout.gpus_per_node

    @property
    def nodes(self) -> int | None:
        return self.layout.nodes

    @property
    def ranks(self) -> int:
        return self.layout.ranks

    @property
    def single_task(self) -> bool:
        """One task in all: a correct size-1 job whatever srun's MPI plugin."""
        return self.layout.single_task

    @property
    def asks_allocation(self) -> bool:
        return not self.request.inside_allocation
