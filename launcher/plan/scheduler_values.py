"""The scheduler values of a launch (partition, account, QOS, constraint, time), each resolved
once: as given, else the site's. The plan keeps them in the `Launch`; the checks, the #SBATCH
lines and salloc's options read them there, so a check judges the value the script writes.
tests/unit/test_architecture.py holds every other module to that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.model import Site


@dataclass(frozen=True)
class SchedulerValues:
    """What the job asks Slurm for by name; None: nothing written (Slurm's default)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    time: str | None = None


def scheduler_values(
    site: Site,
    *,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    constraint: str | None = None,
    time: str | None = None,
) -> SchedulerValues:
    """The values given (a request's), each falling back to the site profile's."""
    sched = site.scheduler
    return SchedulerValues(
        partition=partition or sched.partition,
        account=account or sched.account,
        qos=qos or sched.qos,
        constraint=constraint or sched.constraint,
        time=time or sched.time,
    )


def requested_values(site: Site, request: LaunchRequest) -> SchedulerValues:
    """A launch request's scheduler values, each as given, else the site's."""
    return scheduler_values(
        site, partition=request.partition, account=request.account, qos=request.qos,
        constraint=request.constraint, time=request.time,
    )  # fmt: skip
