"""What a user asks of one launch: the parameters, the list of valid ones, and the one place
that checks them.

Each launch parameter is declared once, as a field of `LaunchRequest` (`param`: its flags, its
kind of value, its help, the profile key it falls back to); `OPTIONS` lists them, and the CLI
makes its options from it (spelled once for run, batch, doctor and jupyter). `LaunchOptions`
holds them as a command line gives them (the one object the CLI hands the library);
`request_from_options` reads them into a `LaunchRequest` by their declared kind and `check`
checks it; the plan (launcher/plan/planner.py) runs `check` once, so a request that passes it is one the
plan can write.
Each problem is one line naming the flag and what is allowed.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from hvd_container.launcher import controllers, guard, runtimes
from hvd_container.launcher.plan.scheduler_values import scheduler_values
from hvd_container.launcher.run.hang import parse_duration
from hvd_container.launcher.sites.loader import select_site
from hvd_container.launcher.sites.model import MPI_PLUGINS, Site, valid_slurm_time
from hvd_container.launcher.slurm import slurm_megabytes, slurm_seconds

from hvd_container.core.errors import UserError
from hvd_container.core.model import env_name
from hvd_container.core.text import ascii_digits, did_you_mean, has_line_ends, is_utf8
from hvd_container.facts import BUILT_ARCHES, ImageFacts, facts_from_recipe

LAUNCH = "Launch"
RESOURCES = "Resources"
SCHEDULER = "Scheduler"
CONTAINER = "Container"

OptionType = Literal["str", "int", "list", "flag"]


class Option(NamedTuple):
    """One launch parameter on the command line: its flags, its kind of value, its help, the
    panel of `--help` it shows in, and the profile key it falls back to where not given."""

    flags: tuple[str, ...]
    type: OptionType
    help: str
    panel: str
    site_key: str | None = None


def param(
    flags: tuple[str, ...],
    kind: OptionType,
    help: str,  # noqa: A002 (the option's help, as typer names it)
    panel: str,
    *,
    default: Any = None,
    factory: Callable[[], Any] | None = None,
    site_key: str | None = None,
) -> Any:
    """A LaunchRequest field that is a launch parameter: the one place it is declared."""
    option = {"option": Option(flags, kind, help, panel, site_key)}
    if factory is not None:
        return field(default_factory=factory, metadata=option)
    return field(default=default, metadata=option)


@dataclass
class LaunchRequest:
    """Everything a user asks for in one launch; None means "the site's default". Each launch
    parameter is declared here once, with its flags and help (`param`): OPTIONS, the CLI's
    options, LaunchOptions and run_options are made from these declarations."""

    script: str
    args: list[str] = field(default_factory=list)
    image: str | None = param(
        ("--image",), "str", "Image to run: a .sif/.sqfs path or a registry reference.", CONTAINER
    )
    recipe: str | None = param(
        ("--recipe",),
        "str",
        "Recipe the image was built from (name or path): names the image, enables checks.",
        CONTAINER,
    )
    ntasks: int | None = param(("-n", "--ntasks"), "int", "Total ranks.", RESOURCES)
    nodes: int | None = param(("-N", "--nodes"), "int", "Nodes.", RESOURCES)
    ntasks_per_node: int | None = param(("--ntasks-per-node",), "int", "Ranks per node.", RESOURCES)
    gpus_per_node: int | None = param(
        ("--gpus-per-node",),
        "int",
        "GPUs per node (default: one per rank).",
        RESOURCES,
        site_key="scheduler.gpus_per_node",
    )
    gpus_per_task: int | None = param(
        ("--gpus-per-task",),
        "int",
        "Discouraged (every rank sees only GPU 0): turned into per-node GPUs.",
        RESOURCES,
    )
    cpus_per_task: int | None = param(
        ("-c", "--cpus-per-task"),
        "int",
        "CPUs per rank.",
        RESOURCES,
        site_key="scheduler.cpus_per_task",
    )
    mem: str | None = param(
        ("--mem",),
        "str",
        "Memory a node, as Slurm writes it (64G, 990000M; megabytes without a unit; 0: all of it) (default: the site's, or the node's share for the GPUs asked for where the site's default is too small for a training rank).",
        RESOURCES,
    )  # a node's memory, as Slurm writes a size (64G)
    mem_per_gpu: str | None = param(
        ("--mem-per-gpu",), "str", "Memory for each GPU asked for (instead of --mem).", RESOURCES
    )  # each GPU's
    mpi: str | None = param(
        ("--mpi",), "str", "srun --mpi plugin (default: the site's).", LAUNCH, site_key="mpi"
    )  # srun --mpi= plugin; overrides the site's
    controller: str | None = param(
        ("--controller",), "str", "", LAUNCH, site_key="controller"
    )  # None: the one the script is written for, else mpi
    runtime: str | None = param(
        ("--runtime",),
        "str",
        "Container runtime instead of the site's: {runtimes}.",
        CONTAINER,
        site_key="runtime.kind",
    )  # another runtime than the site's default
    modules: list[str] = param(
        ("--module",), "list", "Extra shifter module (repeatable).", CONTAINER, factory=list
    )  # extra shifter modules
    binds: list[str] = param(
        ("-B", "--bind"),
        "list",
        "Bind mount SRC[:DST[:ro|rw]] (repeatable).",
        CONTAINER,
        factory=list,
    )
    keyrings: list[str] = param(
        ("--keyring",),
        "list",
        "A public key file you trust (repeatable; OpenPGP for a SIF, PEM for a registry image): the image's signature is checked against it and the site's images.signatures.keys before the launch.",
        CONTAINER,
        factory=list,
    )
    env: dict[str, str] = param(
        ("-e", "--env"),
        "list",
        "Environment variable NAME=VALUE (repeatable). Not sbatch's -e/--error: that is --job-error.",
        LAUNCH,
        factory=dict,
    )
    workdir: str | None = param(
        ("--workdir",), "str", "Working directory inside the container.", CONTAINER
    )
    job_name: str | None = param(("-J", "--job-name"), "str", "Job name.", SCHEDULER)
    time: str | None = param(
        ("-t", "--time"), "str", "Time limit (HH:MM:SS).", SCHEDULER, site_key="scheduler.time"
    )
    partition: str | None = param(
        ("-p", "--partition"), "str", "Partition.", SCHEDULER, site_key="scheduler.partition"
    )
    account: str | None = param(
        ("-A", "--account"), "str", "Account.", SCHEDULER, site_key="scheduler.account"
    )
    qos: str | None = param(("-q", "--qos"), "str", "QOS.", SCHEDULER, site_key="scheduler.qos")
    constraint: str | None = param(
        ("-C", "--constraint"),
        "str",
        "Node constraint.",
        SCHEDULER,
        site_key="scheduler.constraint",
    )
    comment: str | None = param(
        ("--comment",), "str", "Job comment (mandatory on some sites).", SCHEDULER
    )
    job_output: str | None = param(
        ("--job-output",),
        "str",
        "The job's stdout file, sbatch's -o/--output (default %x_%j.out: job name and id).",
        SCHEDULER,
    )  # sbatch's --output: the job's stdout file
    job_error: str | None = param(
        ("--job-error",),
        "str",
        "The job's stderr file, sbatch's -e/--error (default %x_%j.err).",
        SCHEDULER,
    )  # sbatch's --error
    requeue: bool = param(
        ("--requeue",),
        "flag",
        "Queue the job again when a node fails or it is preempted; the script must resume from its last checkpoint (default: --no-requeue, a node failure ends the job as NODE_FAIL).",
        SCHEDULER,
        default=False,
    )  # a job a node failure or preemption ends is queued again
    until_done: bool = param(
        ("--until-done",),
        "flag",
        "Go on past the time limit until the script exits 0: Slurm warns the job --grace before its limit, the ranks get SIGUSR1 (HVD_CHECKPOINT_SIGNAL names it: write a checkpoint, exit non-zero), and the job goes on from that checkpoint in a next segment: requeued where the site allows it (scheduler.requeue), else a job that depends on this one.",
        SCHEDULER,
        default=False,
    )
    max_restarts: int | None = param(
        ("--max-restarts",),
        "int",
        "With --until-done, or inside an allocation: restarts at most (default 10), the next segments and the step's own: the step starts again from the last checkpoint after a hang (--hang-after), a lost node, or a script error after progress (a line in $HVD_PROGRESS); a SyntaxError, a missing module or file, out of memory, or the same error twice are not retried.",
        SCHEDULER,
    )  # restarts of the step and segments after the first, at most
    spare_nodes: int | None = param(
        ("--spare-nodes",),
        "int",
        "With --until-done, or --max-restarts inside an allocation: the allocation holds this many nodes beyond -N; when a node is lost the nodes are screened (as --screen does) and the step starts again on -N good ones (fewer only with --screen-policy shrink).",
        RESOURCES,
    )  # nodes the allocation holds beyond -N, for a lost node's ranks
    grace: int | None = param(
        ("--grace",),
        "str",
        "With --until-done: how long before the time limit the ranks are told to checkpoint (90s, 5m; default: the site's, else 2m).",
        SCHEDULER,
    )  # seconds between Slurm's warning and the time limit (--until-done)
    stage: bool = param(
        ("--stage",),
        "flag",
        "Copy the image file to each node's local storage with sbcast (Slurm's tree broadcast) before the step and run it from there: no rank reads it from the shared file system (the site's images.stage_dir, default /tmp).",
        CONTAINER,
        default=False,
    )  # the image file copied to each node's local storage (sbcast) first
    hang_after: int | None = param(
        ("--hang-after",),
        "str",
        "When the job prints nothing for this long (90s, 10m, 1h) while it runs, say so and show each Python process's stacks (the launch loads a watcher in them and sets PYTHONUNBUFFERED; a batch script carries it for `logs -f --hang-after`).",
        LAUNCH,
    )  # seconds without output after which `run` calls it a hang
    cancel_on_hang: bool = param(
        ("--cancel-on-hang",),
        "flag",
        "With --hang-after: then end the job; run exits 124.",
        LAUNCH,
        default=False,
    )  # `run` ends a job it found hung
    screen: bool = param(
        ("--screen",),
        "flag",
        "Inside an allocation: first screen its nodes with short steps of the image's smoke program (each node alone, then pairs over the network: the container starts, the all-reduce is right and not slow), then run on the good ones (srun --exclude the others); see --screen-policy.",
        LAUNCH,
        default=False,
    )  # the allocation's nodes screened first, the step on the good ones
    screen_policy: str = param(
        ("--screen-policy",),
        "str",
        "When --screen, or a lost node with --spare-nodes, leaves fewer good nodes than asked: fail (default: stop), shrink (run on those, fewer ranks, with a warning) or, with --until-done, requeue (the job goes on in a next segment, a job of its own without the lost nodes: sbatch --exclude).",
        LAUNCH,
        default="fail",
    )  # fewer good nodes than asked: fail, or shrink
    srun_options: list[str] = param(
        ("--srun-option",),
        "list",
        "An srun option this tool has no flag for, with its value after '=': --srun-option=--mem-bind=local (repeatable; the rules of a profile's srun_options).",
        SCHEDULER,
        factory=list,
    )  # --srun-option: on the step's srun
    sbatch_options: list[str] = param(
        ("--sbatch-option",),
        "list",
        "An sbatch/salloc option this tool has no flag for, with its value after '=': --sbatch-option=--exclusive, --reservation=R, --mail-type=END (repeatable; the rules of a profile's sbatch_options).",
        SCHEDULER,
        factory=list,
    )  # --sbatch-option: #SBATCH, salloc
    # False: `doctor` without a script (`script` is then a stand-in: nothing to read or detect)
    script_given: bool = True
    facts: ImageFacts | None = None  # the recipe's (the image's own labels win over them)
    inside_allocation: bool = False  # True inside salloc/sbatch: no resource options on srun


def _controller_help() -> str:
    return (
        "How ranks find each other (default: the one the script is written for, else mpi): "
        + "; ".join(f"{name}: {controllers.get(name).about}" for name in controllers.names())
    )


SITE = Option(
    ("--site",), "str",
    "Site name or profile path (default: $HVD_CONTAINER_SITE, config.yaml, cluster name, local).",
    LAUNCH,
)  # fmt: skip
# The parameters of a launch, as run, batch, doctor and jupyter take them: the site, then
# LaunchRequest's declared ones in their order.
OPTIONS: dict[str, Option] = {
    "site": SITE,
    **{f.name: f.metadata["option"] for f in fields(LaunchRequest) if "option" in f.metadata},
}


def run_options(request: LaunchRequest, site: str) -> list[str]:
    """The options of `hvd-container run` that ask for request again, site naming its profile
    (each value in one word, `--flag=value`): what a batch job that screens its nodes runs."""
    words = [f"--site={site}"]
    for name, option in OPTIONS.items():
        value: Any = getattr(request, name) if name != "site" else None
        if name == "env":
            value = [f"{key}={text}" for key, text in request.env.items()]
        elif name in ("hang_after", "grace") and value is not None:
            value = f"{value}s"
        flag = option.flags[-1]  # the long one
        if option.type == "flag":
            words += [flag] if value else []
        elif option.type == "list":
            words += [f"{flag}={item}" for item in value or []]
        elif value is not None:
            words.append(f"{flag}={value}")
    return words


def option_help(name: str) -> str:
    """The help text of a launch parameter; `{runtimes}` in it stands for the runtime kinds,
    which `help_shown` fills in (listing them loads every runtime's module)."""
    if name == "controller":
        return _controller_help()
    return OPTIONS[name].help


def help_shown(text: str) -> str:
    """A parameter's help as shown, with the registered runtime kinds in it."""
    if "{runtimes}" not in text:
        return text
    return text.replace("{runtimes}", ", ".join(runtimes.kinds()))


# far above any machine's ranks or nodes; keeps the layout arithmetic on small integers
MAX_COUNT = 1_000_000


def flag_name(name: str) -> str:
    """How messages name a parameter: its flags, short first (-n/--ntasks)."""
    return "/".join(sorted(OPTIONS[name].flags, key=lambda f: f.startswith("--")))


def plain_count(value: str | int, name: str) -> int:
    """A count as Slurm reads one: ASCII decimal digits only. int() alone would take `1_6`,
    Unicode digits and surrounding spaces, which srun and sbatch do not."""
    if isinstance(value, int):
        return value
    if not (value.isascii() and value.isdigit()):
        # named as the command line's other usage errors name an option: long flag first
        flags = "/".join(sorted(OPTIONS[name].flags, key=lambda f: not f.startswith("--")))
        raise UserError(f"{flags}: {value!r} is not a valid int (decimal digits only)")
    return int(value)


def parse_env(values: list[str] | None) -> dict[str, str]:
    """NAME=VALUE items of --env as a mapping."""
    env: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            hint = "" if sep else " (-e/--env sets a variable; the job's error file is --job-error)"
            raise UserError(f"--env: expected NAME=VALUE, got {item!r}{hint}")
        env[name] = value
    return env


class LaunchOptions(Mapping[str, Any]):
    """The launch parameters as a command line gives them: keyword arguments named as in
    OPTIONS (another name is a TypeError), None where not given; counts may be text. Read-only:
    what the CLI hands the library reaches it as given."""

    __slots__ = ("_values",)

    def __init__(self, **given: Any) -> None:
        unknown = sorted(set(given) - set(OPTIONS))
        if unknown:
            raise TypeError(f"not a launch parameter: {', '.join(unknown)}")
        self._values = MappingProxyType({name: given.get(name) for name in OPTIONS})

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self._values.items() if v is not None)
        return f"LaunchOptions({given})"


def request_from_options(
    script: str,
    args: list[str] | None = None,
    options: LaunchOptions | None = None,
    *,
    warnings: list[str] | None = None,
    notes: list[str] | None = None,
) -> tuple[Site, LaunchRequest]:
    """(site, request) from the launch parameters. --recipe's facts are read here; a profile
    passed over while choosing the site is said in `warnings`, the image chosen for the
    nodes' architecture in `notes`."""
    given = dict(options or LaunchOptions())
    site = select_site(given.pop("site"), warnings)
    values = {name: _read(name, value) for name, value in given.items() if value is not None}
    recipe = values.get("recipe")
    facts = _recipe_facts(recipe, site, values, notes) if recipe else None
    inside = bool(os.environ.get("SLURM_JOB_ID"))
    if inside and values.get("cpus_per_task") is None:
        # the allocation's CPUs per task, which a step no longer inherits (Slurm 22.05)
        allocated = os.environ.get("SLURM_CPUS_PER_TASK", "")
        values["cpus_per_task"] = int(allocated) if ascii_digits(allocated) else None
    request = LaunchRequest(
        script=script, args=list(args or []), facts=facts, inside_allocation=inside, **values
    )
    return site, request


# parameters whose text is read into another value (seconds, a mapping)
_READERS: dict[str, Callable[[Any], Any]] = {
    "env": lambda items: parse_env(list(items)),
    "grace": lambda text: parse_duration(text, "--grace"),
    "hang_after": parse_duration,
}


def _read(name: str, value: Any) -> Any:
    """A parameter's value as the request holds it, by its declared kind."""
    if name in _READERS:
        return _READERS[name](value)
    kind = OPTIONS[name].type
    if kind == "int":
        return plain_count(value, name)
    if kind == "flag":
        return bool(value)
    if kind == "list":
        return list(value)
    return value


def _recipe_facts(
    recipe: str, site: Site, values: dict[str, Any], notes: list[str] | None
) -> ImageFacts:
    """--recipe's facts, of the image for the partition's nodes: of a recipe that makes one for
    each of several architectures, that one; of a recipe of one image, that image, or the one
    `build --arch` makes for nodes of another architecture where the recipe can make it (its
    lock is there: the built-in GPU recipes for Grace Hopper). The choice is a note."""
    # the recipe model only for --recipe: importing it adds about 40 ms to a dry run
    from hvd_container.containers import recipe_loader

    arches = recipe_loader.image_arches(recipe)
    wanted = site.arch_for(_partition(site, values))
    arch: str | None = wanted
    if arches == [None]:
        own = recipe_loader.read_recipe(recipe).arch
        makes = wanted in BUILT_ARCHES and recipe_loader.makes_image_for(recipe, wanted)
        # the same image; or one it cannot make: the arch check says what works
        arch = wanted if wanted != own and makes else None
    elif wanted not in arches:
        raise UserError(
            f"--recipe {recipe}: its images are for {', '.join(map(str, arches))}, but "
            f"{_where(site, values)} runs {wanted}: add {wanted} to the recipe's arch: list "
            "and build it"
        )
    found = recipe_loader.read_recipe(recipe, arch)
    if arch is not None and notes is not None:
        made = (
            f" (`hvd-container build {recipe} --arch {arch}` makes it)" if arches == [None] else ""
        )
        notes.append(
            f"--recipe {recipe}: its {arch} image, {found.image_tag}, for the {arch} nodes of "
            f"{_where(site, values)}{made}"
        )
    return facts_from_recipe(found)


def _partition(site: Site, values: dict[str, Any]) -> str | None:
    """The partition the launch asks for, else the site's default."""
    return scheduler_values(site, partition=values.get("partition")).partition


def _where(site: Site, values: dict[str, Any]) -> str:
    partition = _partition(site, values)
    return f"partition {partition}" if partition else f"site {site.name}"


# values that go into options and #SBATCH lines; the script's own arguments and --env values
# are the user's to choose: they are quoted wherever they are written
# bidirectional marks and overrides (U+200E/F, U+202A-E, U+2066-9): a value holding one is
# shown in another order than the one it has
REORDERING = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")

_ONE_LINE = (
    "image", "recipe", "mem", "mem_per_gpu", "mpi", "runtime", "job_name", "time", "partition", "account", "qos",
    "constraint", "comment", "workdir", "job_output", "job_error", "controller",
)  # fmt: skip

SCREEN_POLICIES = ("fail", "shrink", "requeue")

COUNTS = ("ntasks", "nodes", "ntasks_per_node", "gpus_per_node", "gpus_per_task", "cpus_per_task")


def passthrough_refusal(option: str, flag: str) -> str | None:
    """Why --sbatch-option/--srun-option may not pass `option`, or None: whole options read as
    Slurm reads them, each one the guard allows and none this tool has a flag for."""
    if not option.startswith("-") or option.strip("-") == "" or has_line_ends(option):
        return f"{flag} {option!r}: give one option, such as --exclusive or --mail-type=END"
    if flag == "--sbatch-option" and any(c.isspace() for c in option):
        return f"{flag} {option!r}: an #SBATCH option has no spaces (--mail-type=END,FAIL)"
    command = "srun" if flag == "--srun-option" else "sbatch"
    refused = guard.slurm_entry_refusal(option, command, profile=False)
    return f"{flag} {refused.why}" if refused is not None else None


DEFAULT_GRACE = 120  # seconds: Slurm may warn up to 60 s early; a checkpoint needs the rest
MIN_GRACE = 10
MAX_GRACE = 65535  # sbatch --signal's warning time is a 16-bit number of seconds
DEFAULT_MAX_RESTARTS = 10
MAX_RESTARTS = 1000


def grace_of(site: Site, request: LaunchRequest) -> int:
    """The warning before the time limit an --until-done job asks for: --grace, else 2
    minutes, or the site's longest if that is shorter."""
    if request.grace is not None:
        return request.grace
    return min(DEFAULT_GRACE, site.scheduler.max_grace or DEFAULT_GRACE)


def restarting(request: LaunchRequest) -> bool:
    """Whether the step starts again after a hang, a lost node or a script error: the loop
    of --until-done's job, or --max-restarts inside an allocation."""
    return request.until_done or (request.inside_allocation and request.max_restarts is not None)


def check_memory(request: LaunchRequest) -> None:
    """--mem and --mem-per-gpu: one of them (Slurm takes one of --mem, --mem-per-cpu and
    --mem-per-gpu), a size as Slurm writes it."""
    if request.mem is not None and request.mem_per_gpu is not None:
        raise UserError("--mem and --mem-per-gpu: give one of them (Slurm refuses a job with both)")
    for flag, value in (("--mem", request.mem), ("--mem-per-gpu", request.mem_per_gpu)):
        if value is not None and not re.fullmatch(r"[0-9]{1,9}[KMGTkmgt]?", value):
            raise UserError(
                f"{flag}: {value!r} is not a memory size as Slurm writes it (allowed: megabytes, "
                "or a number with K, M, G or T: 64G, 990000M)"
            )
    if request.mem_per_gpu is not None and slurm_megabytes(request.mem_per_gpu) == 0:
        raise UserError(
            "--mem-per-gpu: must be more than 0 (--mem=0 asks for all of a node's memory)"
        )


def check_until_done(site: Site, request: LaunchRequest) -> None:
    """--until-done, --max-restarts, --spare-nodes and --grace, each checked once (UserError
    naming the flag)."""
    if request.grace is not None and not request.until_done:
        raise UserError("--grace goes with --until-done")
    if request.max_restarts is not None and not restarting(request):
        raise UserError(
            "--max-restarts goes with --until-done (or inside an allocation, where it restarts "
            "the step)"
        )
    if request.spare_nodes is not None:
        if not restarting(request):
            raise UserError(
                "--spare-nodes goes with --until-done (or --max-restarts inside an allocation)"
            )
        if not 1 <= request.spare_nodes <= MAX_COUNT:
            raise UserError(f"--spare-nodes: must be 1 or more (got {request.spare_nodes})")
        if request.nodes is None:
            raise UserError("--spare-nodes goes with -N/--nodes: the nodes the training runs on")
    if request.max_restarts is not None and not 0 <= request.max_restarts <= MAX_RESTARTS:
        raise UserError(f"--max-restarts: must be 0 to {MAX_RESTARTS} (got {request.max_restarts})")
    if not restarting(request):
        return
    if request.screen:
        raise UserError(
            "--screen and a run that restarts (--until-done, --max-restarts): not together yet; "
            "a lost node is screened for and excluded by the restart itself (--spare-nodes)"
        )
    if request.cancel_on_hang:
        raise UserError(
            "--cancel-on-hang: a run that restarts (--until-done, --max-restarts) restarts a hung "
            "step instead of ending it; leave --cancel-on-hang out"
        )
    if not request.until_done:
        return
    if request.inside_allocation:
        raise UserError(
            "--until-done: the job goes on in segments of its own, which an allocation cannot "
            "give: run it outside salloc or a job (run or batch submit it), or use --max-restarts "
            "here"
        )
    grace, longest = grace_of(site, request), site.scheduler.max_grace
    if grace < MIN_GRACE:
        raise UserError(
            f"--grace: {grace}s is too short to write a checkpoint (at least {MIN_GRACE}s)"
        )
    if grace > MAX_GRACE:
        raise UserError(f"--grace: {grace}s is more than Slurm's --signal takes ({MAX_GRACE}s)")
    if longest is not None and grace > longest:
        raise UserError(
            f"--grace: {grace}s is longer than site {site.name} lets a job ask for ({longest}s)"
        )
    time = scheduler_values(site, time=request.time).time
    if time and valid_slurm_time(time) and grace >= slurm_seconds(time):
        raise UserError(
            f"--grace: {grace}s is not shorter than the time limit {time}: the job would be told to stop at once"
        )


# launchers that start ranks of their own: as the program, each of the job's ranks would start
# its own set (8 torchruns x 4 processes); the controller that does their work instead
LAUNCHERS = {
    "torchrun": "torchrun",
    "torch.distributed.run": "torchrun",
    "torch.distributed.launch": "torchrun",
    "accelerate": "torch",
    "horovodrun": "mpi",
    "mpirun": "mpi",
    "mpiexec": "mpi",
    "srun": None,
}
_PYTHON = re.compile(r"python(3(\.\d+)?)?")


def launcher_as_program(script: str, args: list[str]) -> str | None:
    """Why a launcher given as the program is refused, with what to write instead; None for
    any other program."""
    name = Path(script).name
    words = list(args)
    if _PYTHON.fullmatch(name) and words[:1] == ["-m"] and len(words) > 1:
        name, words = words[1], words[2:]
    elif _PYTHON.fullmatch(name) and words[:1] and words[0].startswith("-m"):
        name, words = words[0][2:], words[1:]
    if name not in LAUNCHERS or (name == "accelerate" and words[:1] != ["launch"]):
        return None
    controller = LAUNCHERS[name]
    rest = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
    target = shlex.join(words[rest:]) if rest is not None else "SCRIPT.py"
    target = "".join(c if c.isprintable() else "?" for c in target)[:200]  # one line
    instead = f"--controller {controller} {target}" if controller else target
    return (
        f"{name} is a launcher: as the program, each of the job's ranks would start ranks of "
        f"its own; hvd-container starts them itself (ranks per node: --ntasks-per-node): give "
        f"the script instead, `hvd-container run ... {instead}`"
    )


def check(site: Site, request: LaunchRequest) -> None:
    """Raise UserError for the first thing in request that site cannot run as asked."""
    launcher = launcher_as_program(request.script, request.args)
    if launcher is not None:
        raise UserError(launcher)
    for flag, given in (
        ("--srun-option", request.srun_options),
        ("--sbatch-option", request.sbatch_options),
    ):
        for option in given:
            why = passthrough_refusal(option, flag)
            if why:
                raise UserError(why)
    for keyring in request.keyrings:
        if not Path(keyring).is_file():
            raise UserError(f"--keyring {keyring}: no such file (expected an OpenPGP public key)")
    if request.cancel_on_hang and request.hang_after is None:
        raise UserError(
            "--cancel-on-hang goes with --hang-after DURATION (how long without output is a hang)"
        )
    if request.screen_policy not in SCREEN_POLICIES:
        raise UserError(
            f"--screen-policy: {request.screen_policy!r} is not allowed (allowed: "
            f"{', '.join(SCREEN_POLICIES)})"
        )
    if request.screen_policy != "fail" and not (request.screen or restarting(request)):
        raise UserError(
            "--screen-policy goes with --screen or a run that restarts (--until-done, "
            "--max-restarts)"
        )
    if request.screen_policy == "requeue" and not restarting(request):
        raise UserError(
            "--screen-policy requeue: the job goes on in a next segment without the lost nodes, "
            "which only --until-done's job has (use fail or shrink here)"
        )
    check_until_done(site, request)
    if request.mpi is not None and request.mpi not in MPI_PLUGINS:
        raise UserError(
            f"--mpi: {request.mpi!r} is not allowed (allowed: {', '.join(MPI_PLUGINS)})"
        )
    if request.controller is not None:
        controllers.get(request.controller)  # an unknown one is refused there
    site.runtime_for(request.runtime)  # an unknown runtime is refused there
    for name in COUNTS:
        value = getattr(request, name)
        if value is not None and not 1 <= value <= MAX_COUNT:
            raise UserError(f"{flag_name(name)}: must be 1 to {MAX_COUNT} (got {value})")
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
            f"--partition: {request.partition!r} is not a partition of site {site.name}{did_you_mean(request.partition, known)} (allowed: {', '.join(known)})"
        )
    if request.time and not valid_slurm_time(request.time):
        raise UserError(
            f"--time: {request.time!r} is not a Slurm time (MINUTES, HH:MM:SS or D-HH:MM:SS)"
        )
    check_memory(request)
    one_line = [
        (flag_name(n) if n in OPTIONS else "SCRIPT", getattr(request, n))
        for n in (*_ONE_LINE, "script")
    ]
    one_line += [("--module", m) for m in request.modules] + [
        ("-B/--bind", b) for b in request.binds
    ]
    for flag, value in one_line:
        if isinstance(value, str) and has_line_ends(value):
            raise UserError(
                f"{flag}: {value!r} has control characters or line breaks, which would break "
                "the line it goes on (srun's options, #SBATCH lines)"
            )
        if isinstance(value, str) and REORDERING.search(value):
            raise UserError(
                f"{flag}: {ascii(value)} holds a character that reorders text on screen (a "
                "bidirectional mark or override): the line shown would not read as the line run"
            )
        if isinstance(value, str) and not is_utf8(value):
            raise UserError(
                f"{flag}: {ascii(value)} is not UTF-8 text: Slurm would store it changed "
                "(give the name in UTF-8)"
            )
    nul = [a for a in request.args if "\0" in a] + [v for v in request.env.values() if "\0" in v]
    if nul:
        raise UserError(f"{nul[0]!r}: a NUL byte cannot be passed to a program (argv, environment)")
    for name, value in request.env.items():
        try:
            env_name(name)
        except ValueError:
            raise UserError(
                f"--env: {name!r} is not a variable name (letters, digits, _)"
            ) from None
        if not is_utf8(value):
            raise UserError(
                f"--env {name}: its value {ascii(value)} is not UTF-8 text, which the job's "
                "files and Slurm cannot carry unchanged (give it in UTF-8)"
            )
    if request.image is not None and request.image.startswith("-"):
        raise UserError(
            f"--image: {request.image!r} starts with '-', which the runtime would read as an "
            f"option: name the file ./{request.image}"
        )
