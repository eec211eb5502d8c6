"""Controllers: how the ranks of a launch find their place and each other. Everything special
about one lives in its own module here.

A module defines a `Controller` subclass: the srun MPI plugin it needs, how it lays out tasks
on nodes, the program it wraps the script in (a rendezvous, say), what it needs in the image,
and the smoke test doctor runs with it. It may register checks of its own
(launcher/checks/registry.py); they apply only to launches with that controller. The modules are found
by listing this package (helpers start with `_`): adding a controller is adding a file.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from hvd_container.launcher.controllers import _scan
from hvd_container.launcher.rooms import classes_in

from hvd_container.core.errors import UserError

# a missing script's likely name (a typo), for the launch's warnings
near_name = _scan.near_name

if TYPE_CHECKING:
    from hvd_container.launcher.checks.verdict import Verdict
    from hvd_container.launcher.plan.launch import Launch
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.model import Site

    from hvd_container.facts import ImageFacts


@dataclass(frozen=True)
class Shape:
    """Nodes and tasks as the controller lays them out (None: Slurm's default)."""

    ntasks: int | None
    nodes: int | None
    ntasks_per_node: int | None
    job_name: str | None
    processes_per_node: int | None = None  # ranks a node's task starts itself (torchrun)


def program_path(script: str) -> str:
    """The script as the runtime or python is given it: a leading '-' would read as an option."""
    return f"./{script}" if script.startswith("-") else script


def stem(script: str) -> str:
    name = script.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".py") else name or "job"


class Controller:
    """A way for ranks to find each other. The defaults suit a program that does so through
    srun's MPI plugin with one rank per GPU (Horovod over MPI)."""

    name: ClassVar[str]
    about: ClassVar[str]  # one line for --controller's help
    default: ClassVar[bool] = False  # the controller when none is asked for or found
    uses_host_mpi: ClassVar[bool] = False  # ranks talk through MPI started by srun
    smoke: ClassVar[str | None] = None  # doctor --smoke's program (Python source), if any
    task_env: ClassVar[tuple[str, ...]] = ()  # variables wrap_task sets for the container
    # the program reads srun's own SLURM_*/PMI_* (MPI, Lightning); False where wrap_task hands
    # it all it needs as task_env, so a runtime that drops the host's variables may still run it
    reads_srun_env: ClassVar[bool] = True
    # the program requeues its own job when Slurm's warning (SIGUSR1) reaches it (Lightning's
    # SLURMEnvironment, auto_requeue): --until-done then only hands the signal on
    requeues_on_signal: ClassVar[bool] = False
    # each rank takes the GPU of its LOCAL_RANK (torch.cuda.set_device, cuda:LOCAL_RANK): more
    # ranks on a node than GPUs crash there, so they are refused, not only warned
    one_gpu_per_rank: ClassVar[bool] = False

    def __init__(self, reason: str | None = None, why: str = "") -> None:
        self.reason = reason  # why it was chosen, when it was not asked for by name
        # why it was chosen, in words for the dry run, the batch script and --json
        self.why = why or "asked for with --controller"
        self.guessed = False  # nothing told: the default, taken without evidence

    @classmethod
    def detect(cls, script: _scan.Script, facts: ImageFacts | None) -> str | None:
        """Whether the script (read once, by `choose`) is written for this controller: None if not, "" when the script
        itself says so, else why it is taken to be (the script is not readable here, say)."""
        return None

    def shape(self, request: LaunchRequest, site_gpus: int) -> Shape:
        """Tasks and nodes: one rank per GPU, a node's worth when nothing is asked."""
        n, nodes, per_node = request.ntasks, request.nodes, request.ntasks_per_node
        if n is None and per_node is None:
            n = max(site_gpus, 1) * (nodes or 1)
        elif per_node is not None and nodes is None:
            # the ranks per node the user asked for, not the site's GPUs per node, set the nodes
            nodes = math.ceil(n / per_node) if n is not None else 1
        return Shape(n, nodes, per_node, request.job_name)

    def mpi_plugin(
        self, site: Site, request: LaunchRequest, facts: ImageFacts | None, single_task: bool
    ) -> tuple[str | None, str | None]:
        """(srun's --mpi plugin, a note when it is not the one asked for or the site's)."""
        return request.mpi or site.mpi, None

    def wrap_step(self, launch: Launch, srun: list[str]) -> list[str]:
        """What runs the srun line (in the batch script, or here inside an allocation): the
        srun line itself, or a wrapper that prepares the step's environment first."""
        return srun

    def wrap_task(self, launch: Launch, argv: list[str]) -> list[str]:
        """What each srun task runs on its node around the runtime's command `argv` (outside
        the container: Slurm's tools are there); the variables it sets are `task_env`."""
        return argv

    def environment(self, script: str, gpus: int) -> dict[str, str]:
        """Variables the program needs from this controller's launch (the request's -e win)."""
        return {}

    def program(self, python: str, script: str, args: list[str]) -> list[str]:
        """The argv each task runs in the container."""
        if script.endswith(".py"):
            return [python, program_path(script), *args]
        return [program_path(script), *args]

    # What the launch checks ask of a controller (launcher/checks/registry.py): None means all is well.

    def missing_in_image(self, launch: Launch) -> Verdict | None:
        """What the image lacks for this controller (a failure, or a warning where the job may
        bring it), with the fix."""
        return None

    def gpu_problem(self, launch: Launch) -> Verdict | None:
        """What is wrong with reducing GPU tensors with this controller."""
        return None

    def application(self, facts: ImageFacts | None) -> str | None:
        """What the job runs, in the words of a site's accounting (KISTI Neuron's appl=):
        None where the launch does not tell."""
        return "pytorch" if facts is not None and facts.torch else None

    def available(self, facts: ImageFacts | None) -> bool:
        """Whether the image can run this controller's smoke test."""
        return False


@functools.cache
def _classes() -> dict[str, type[Controller]]:
    """name -> Controller class, from the modules of this package."""
    found = classes_in(__name__, __path__, Controller)
    # the default first, then by name: the order --controller's help and errors list them in
    return {c.name: c for c in sorted(found, key=lambda c: (not c.default, c.name))}


def names() -> list[str]:
    return list(_classes())


def get(name: str) -> Controller:
    cls = _classes().get(name)
    if cls is None:
        raise UserError(f"--controller: {name!r} is not allowed (allowed: {', '.join(names())})")
    return cls()


def choose(
    request: LaunchRequest, facts: ImageFacts | None, site: Site | None = None
) -> Controller:
    """The controller asked for by name, else the one the image's recipe or the site declares,
    else the one the script is written for, else the default (Horovod over MPI); its `why`
    says which of these it was."""
    if request.controller is not None:
        return get(request.controller)
    for declared, where in (
        (facts.controller if facts else None, facts.source if facts else ""),
        (site.controller if site else None, f"site {site.name}" if site else ""),
    ):
        if declared is not None:
            chosen = _classes().get(declared)
            if chosen is None:
                raise UserError(
                    f"controller: {declared!r} ({where}) is not allowed (allowed: {', '.join(names())})"
                )
            return chosen(f"{where} declares it", f"{where} declares it")
    default = next(cls for cls in _classes().values() if cls.default)
    if not request.script_given:  # doctor without a script: nothing to detect from
        guess = default(None, "the default: no script given (`doctor ... SCRIPT` detects it)")
        guess.guessed = True
        return guess
    found = _scan.read(request.script)
    for cls in _classes().values():
        reason = cls.detect(found, facts)
        if reason is not None:
            shown = evidence(found) or "it says so"
            return cls(reason, reason or f"{request.script} {shown}")
    if found.text is not None:
        nothing = "names neither Horovod, torch.distributed nor Lightning"
    else:
        nothing = f"is {found.why_not}"
    advice = "pass --controller (torch or torchrun for torch.distributed) if it is not written for Horovod"
    near = _scan.near_name(request.script)
    if near is not None:  # a typo: what the file it is close to would launch with
        beside = _scan.read(near)
        told = next((c for c in _classes().values() if c.detect(beside, facts) is not None), None)
        advice = f"did you mean {near}?" + (
            f" ({evidence(beside) or 'it says so'}: --controller {told.name})" if told else ""
        )
    guess = default(None, f"the default: {request.script} {nothing}, so nothing tells; {advice}")
    guess.guessed = True
    return guess


def evidence(found: _scan.Script) -> str | None:
    """What in the script shows its controller, for `why`."""
    for family in (_scan.LIGHTNING, _scan.HOROVOD, _scan.TORCH_DISTRIBUTED):
        shown = found.shows(family)
        if shown:
            return shown
    return None


def smoke_controllers(facts: ImageFacts | None) -> list[Controller]:
    """The controllers doctor --smoke runs the image with."""
    return [cls() for cls in _classes().values() if cls.smoke and cls().available(facts)]


def script_label(script: str, controller: Controller) -> str:
    """The script as messages name it, with why it counts as written for the controller."""
    return f"{script} ({controller.reason})" if controller.reason else script
