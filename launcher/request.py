"""What a user asks of one launch, and the one place that checks it.

`check(site, request)` runs on every path a launch takes (run, batch, jupyter, the quick dry
run, library callers of prepare_launch or plan_launch), so a request that passes it is one the
composers can write. Each problem is one line naming the flag and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hvd_container.launcher.binds import parse_bind, split_binds
from hvd_container.launcher.facts import ImageFacts
from hvd_container.launcher.sites import MPI_PLUGINS, Site, env_name_problem, valid_slurm_time

from hvd_container.core.errors import UserError
from hvd_container.core.text import has_line_ends

CONTROLLERS = ("mpi", "gloo")


@dataclass
class LaunchRequest:
    """Everything a user asks for in one launch; None means "the site's default"."""

    script: str
    args: list[str] = field(default_factory=list)
    image: str | None = None
    recipe: str | None = None
    facts: ImageFacts | None = None  # filled from the recipe (or image labels) by the caller
    ntasks: int | None = None
    nodes: int | None = None
    ntasks_per_node: int | None = None
    gpus_per_node: int | None = None
    gpus_per_task: int | None = None
    cpus_per_task: int | None = None
    mpi: str | None = None  # srun --mpi= plugin; overrides the site's
    controller: Literal["mpi", "gloo"] = "mpi"
    runtime: str | None = None  # another runtime than the site's default
    modules: list[str] = field(default_factory=list)  # extra shifter modules
    job_name: str | None = None
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    comment: str | None = None
    job_output: str | None = None  # sbatch's --output: the job's stdout file
    job_error: str | None = None  # sbatch's --error
    env: dict[str, str] = field(default_factory=dict)
    binds: list[str] = field(default_factory=list)
    workdir: str | None = None
    lightning: bool | None = None  # None: scan the script
    inside_allocation: bool = False  # True inside salloc/sbatch: no resource options on srun


def program_path(script: str) -> str:
    """The script as the runtime or python is given it: a leading '-' would read as an option."""
    return f"./{script}" if script.startswith("-") else script


# far above any machine's ranks or nodes; keeps the layout arithmetic on small integers
MAX_COUNT = 1_000_000

# values that go into options and #SBATCH lines; the script's own arguments and --env values
# are the user's to choose: they are quoted wherever they are written
_ONE_LINE = (
    ("image", "--image"), ("recipe", "--recipe"), ("mpi", "--mpi"), ("runtime", "--runtime"),
    ("job_name", "-J/--job-name"), ("time", "-t/--time"), ("partition", "-p/--partition"),
    ("account", "-A/--account"), ("qos", "-q/--qos"), ("constraint", "-C/--constraint"),
    ("comment", "--comment"), ("workdir", "--workdir"), ("script", "SCRIPT"),
    ("job_output", "--job-output"), ("job_error", "--job-error"),
)  # fmt: skip


def _one_line_values(request: LaunchRequest) -> list[tuple[str, str]]:
    found = [(flag, getattr(request, name)) for name, flag in _ONE_LINE]
    found += [("--module", m) for m in request.modules] + [("-B/--bind", b) for b in request.binds]
    return [(flag, value) for flag, value in found if isinstance(value, str)]


COUNTS = (
    ("ntasks", "-n/--ntasks"),
    ("nodes", "-N/--nodes"),
    ("ntasks_per_node", "--ntasks-per-node"),
    ("gpus_per_node", "--gpus-per-node"),
    ("gpus_per_task", "--gpus-per-task"),
    ("cpus_per_task", "--cpus-per-task"),
)


def check(site: Site, request: LaunchRequest) -> None:
    """Raise UserError for the first thing in request that site cannot run as asked."""
    if request.mpi is not None and request.mpi not in MPI_PLUGINS:
        raise UserError(
            f"--mpi: {request.mpi!r} is not allowed (allowed: {', '.join(MPI_PLUGINS)})"
        )
    if request.controller not in CONTROLLERS:
        raise UserError(
            f"--controller: {request.controller!r} is not allowed (allowed: {', '.join(CONTROLLERS)})"
        )
    site.runtime_for(request.runtime)  # an unknown or unconfigured runtime is refused there
    for name, flag in COUNTS:
        value = getattr(request, name)
        if value is not None and not 1 <= value <= MAX_COUNT:
            raise UserError(f"{flag}: must be 1 to {MAX_COUNT} (got {value})")
    n, nodes, per_node = request.ntasks, request.nodes, request.ntasks_per_node
    if n is not None and nodes is not None and per_node is not None and n > nodes * per_node:
        # fewer is fine: Slurm then reads --ntasks-per-node as a maximum
        raise UserError(
            f"-n {n} is more than -N {nodes} x --ntasks-per-node {per_node} = {nodes * per_node} tasks: raise -N or --ntasks-per-node, or give only two of them"
        )
    if n is not None and nodes is not None and n < nodes:
        raise UserError(f"-n {n} is fewer tasks than -N {nodes} nodes")
    known = site.scheduler.partitions
    if request.partition and known and request.partition not in known:
        raise UserError(
            f"--partition: {request.partition!r} is not a partition of site {site.name} (allowed: {', '.join(known)})"
        )
    if request.time and not valid_slurm_time(request.time):
        raise UserError(
            f"--time: {request.time!r} is not a Slurm time (MINUTES, HH:MM:SS or D-HH:MM:SS)"
        )
    for flag, value in _one_line_values(request):
        if has_line_ends(value):
            raise UserError(
                f"{flag}: {value!r} has control characters or line breaks, which would break "
                "the line it goes on (srun's options, #SBATCH lines)"
            )
    nul = [a for a in request.args if "\0" in a] + [v for v in request.env.values() if "\0" in v]
    if nul:
        raise UserError(f"{nul[0]!r}: a NUL byte cannot be passed to a program (argv, environment)")
    for name in request.env:
        problem = env_name_problem(name)
        if problem:
            raise UserError(f"--env: {problem}")
    for bind in (one for item in request.binds for one in split_binds(item)):
        parsed = parse_bind(bind)
        if isinstance(parsed, str):
            raise UserError(f"--bind: {parsed}")
    if request.image is not None and request.image.startswith("-"):
        raise UserError(
            f"--image: {request.image!r} starts with '-', which the runtime would read as an "
            f"option: name the file ./{request.image}"
        )
