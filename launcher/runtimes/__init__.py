"""Container runtimes: everything special about one runtime lives in its own module here.

A module defines a `Runtime` subclass and a `RuntimeProfile` subclass: the profile keys it
reads (its `kind:` entry of a site profile), how it names images, what it prepares before a
launch (Charliecloud unpacks a SIF), the argv it wraps a program in, and what the launch
checks ask of it (does it give the container the GPUs, inject the host's MPI, bring NCCL's
network plugin). It may register checks of its own (launcher/checks/registry.py); they apply only to
launches with that runtime. The modules are found by listing this package: adding a runtime
is adding a file (and its golden launch lines).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from hvd_container.launcher import guard
from hvd_container.launcher.checks.verdict import Verdict, fail
from hvd_container.launcher.guard import Flag
from hvd_container.launcher.plan.binds import source_of, split_binds
from hvd_container.launcher.rooms import classes_in, room_names
from pydantic import AfterValidator, Field, ValidationInfo, field_validator

from hvd_container.core.errors import UserError
from hvd_container.core.files import not_a_file, private_folder, user_path
from hvd_container.core.model import Line, Strict, empty_list

if TYPE_CHECKING:
    from hvd_container.launcher.plan.launch import Launch


def _glibc(value: str) -> str:
    if not re.fullmatch(r"2\.[0-9]{1,2}", value):
        raise ValueError('a glibc version such as "2.31"')
    return value


class RuntimeProfile(Strict):
    """A site's container runtime and its settings (`runtime:` / `other_runtimes:` entries)."""

    kind: str
    gpu: bool = Field(default=True, description="Give the container the GPUs the job asks for.")
    flags: list[Line] = Field(
        default_factory=empty_list,
        description="More words for the runtime's command line, as given.",
    )
    python: Line = Field(default="python", description="The image's python, for .py scripts.")
    injects_glibc: Annotated[str, AfterValidator(_glibc)] | None = Field(
        default=None,
        description="The glibc the host libraries this runtime injects (MPI, GPU driver) were "
        "built against: an image with an older glibc cannot load them.",
    )
    # the runtime's own options a profile may give (from its manual, cited in its module): any
    # other flag only a built-in or trusted profile may give (launcher/guard.py)
    known_flags: ClassVar[dict[str, Flag]] = {}

    @field_validator("flags")
    @classmethod
    def _flags_are_known(cls, flags: list[str], info: ValidationInfo) -> list[str]:
        kind = (info.data or {}).get("kind", "the runtime")
        guard.judge(guard.runtime_flags_refusal(flags, cls.known_flags, str(kind)), info)
        return flags

    @field_validator("python")
    @classmethod
    def _python_is_the_image_s(cls, python: str, info: ValidationInfo) -> str:
        guard.judge(guard.image_python_refusal(python), info)
        return python


@dataclass(frozen=True)
class Invocation:
    """What to run in the container, independent of the runtime."""

    image: str | None
    program: list[str]
    gpu: bool = True
    flags: list[str] = field(default_factory=list)  # from the runtime's preparation
    modules: list[str] = field(default_factory=list)
    binds: list[str] = field(default_factory=list)  # SRC:DST[:ro|rw], DST always spelled out
    workdir: str | None = None
    env_names: list[str] = field(default_factory=list)  # values come from srun's environment


@dataclass(frozen=True)
class Wrapped:
    """The runtime's part of the command line, and what it needs around it."""

    srun_flags: list[str]  # options srun itself takes (Pyxis)
    argv: list[str]  # what follows the srun options


@dataclass(frozen=True)
class Prepared:
    """What a runtime did or would do before the launch: the image it runs (an unpacked
    directory, say), more flags, variables and binds, a working directory, a script path."""

    image: str | None
    flags: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    binds: list[str] = field(default_factory=list)
    workdir: str | None = None
    script: str | None = None  # the script as the container sees it, when that differs
    notes: list[str] = field(default_factory=list)  # what the user should know
    # files the step reads, path -> text: the batch script writes them before its step (a
    # `run` inside an allocation finds them written by `prepare`)
    files: dict[str, str] = field(default_factory=dict)
    # folders the step needs before it starts: a launch from here has made them; the batch
    # script makes them itself (`batch` writes nothing but its script)
    folders: list[str] = field(default_factory=list)


def is_file_ref(ref: str) -> bool:
    return ref.startswith(("/", "./", "../", "~")) or ref.endswith(
        (".sif", ".img", ".sqsh", ".sqfs", ".squashfs", ".tar.gz")
    )


class Runtime:
    """How a launch runs in one kind of container. The defaults suit a runtime that runs
    registry images, passes the host environment in and gives the GPUs on its own."""

    kinds: ClassVar[tuple[str, ...]]  # the `kind:` values this class serves
    profile_model: ClassVar[type[RuntimeProfile]]
    runs_image: ClassVar[bool] = True  # False: the program runs on the host
    image_files: ClassVar[bool] = False  # True: an image may be a file here (a SIF)
    accepts_modules: ClassVar[bool] = False  # --module (Shifter's)
    gpu_flag: ClassVar[str] = ""  # the option that gives the container the GPUs, if any
    # how `sites probe` finds it on a login node: its program on PATH (kind -> program), or an
    # option of `srun --help` (Pyxis); a new profile takes the found one of lowest rank
    programs: ClassVar[dict[str, str]] = {}
    srun_option: ClassVar[str | None] = None
    probe_rank: ClassVar[int] = 99
    # a registry image: whether the runtime fetches it itself when the job starts (Shifter
    # runs only what its image gateway has pulled: `pull_hint`)
    pulls_itself: ClassVar[bool] = True
    # whether it runs a registry image named by digest, REPOSITORY@sha256:... (containers/
    # image's reference grammar, name[:tag|@digest]): a signed image is then run by the
    # digest that was checked, not by a tag that may move while the job waits
    runs_digests: ClassVar[bool] = False
    # the host folders it mounts on its own ("~": the user's home, ".": the working
    # directory), and what else may be mounted that the tool cannot see from here; a runtime
    # that mounts nothing itself binds what the ranks need (`bind_working_directory`)
    own_mounts: ClassVar[tuple[str, ...]] = ()
    other_mounts: ClassVar[str] = ""

    @classmethod
    def probe_modules(cls, run: Callable[[list[str]], str | None]) -> list[str] | str | None:
        """`sites probe`: the runtime's own modules on this site (Shifter's, podman-hpc's),
        why they could not be read, or None for a runtime without modules. `run` is the
        probe's: a command's output within its time limit, or None (the probe says why)."""
        return None

    @classmethod
    def probed_entry(cls, kind: str, gpu: bool) -> dict[str, Any]:
        """The profile entry `sites probe` writes for this runtime found on a site."""
        return {"kind": kind, "gpu": gpu}

    def __init__(self, profile: RuntimeProfile) -> None:
        self.profile = profile

    @property
    def kind(self) -> str:
        return self.profile.kind

    def image_ref(self, ref: str) -> str:
        """The image as this runtime spells it on its command line."""
        return ref

    def image_path(self, ref: str) -> str | None:
        """The local file or directory that `ref` names, or None for a registry reference."""
        if not self.image_files or not is_file_ref(ref):
            return None
        return os.path.abspath(os.path.expanduser(ref))

    def missing_image(self, ref: str, origin: str) -> str | None:
        """Why `ref` cannot be run from here: a named file that does not exist, or None."""
        path = self.image_path(ref)
        if path is None or user_path(path).exists():
            return None
        return (
            f"{origin} {ref}: no such file or directory (make it with `hvd-container build` "
            "then `hvd-container convert --to sif`)"
        )

    def unusable_image(self, ref: str) -> str | None:
        """Why this runtime cannot run `ref` at all: a named pipe, a device or a socket where
        it takes an image file or directory (a file where it takes registry images)."""
        path = self.image_path(ref)
        problem = not_a_file(path, "an image file or directory", directory=True) if path else None
        return f"--image {ref}: {problem}" if problem else None

    def sbatch_options(self, image: str | None, modules: list[str]) -> list[str]:
        """#SBATCH options of the runtime's own (its Slurm plugin's), for the batch script."""
        return []

    # the command that lists the images it can run on this machine, where it does not pull
    # (Shifter: shifterimg images); `pulled` reads its output
    images_listing: ClassVar[tuple[str, ...]] = ()

    def pull_hint(self, image: str) -> str:
        """The command that makes a registry image runnable, where the runtime does not pull."""
        return ""

    def pulled(self, image: str, listing: str) -> bool:
        """Whether the runtime's own listing of its images has `image`."""
        return False

    def needs_image_here(self, launch: Launch) -> bool:
        """Whether preparing the launch reads the image file on this machine."""
        return False

    def prepare(self, launch: Launch, *, dry_run: bool) -> Prepared:
        """What the launch needs beyond the argv: `dry_run` computes it without side effects."""
        return Prepared(launch.image, notes=self.unseen_python_path(launch))

    def unseen_python_path(self, launch: Launch) -> list[str]:
        """A warning for each folder of -e PYTHONPATH that neither the runtime mounts on its own
        nor a bind (the profile's, --bind) brings in: every rank's import from it would fail."""
        mounted = [_own_mount(m) for m in self.own_mounts]
        mounted += [os.path.realpath(bind.source) for bind in launch.binds]
        notes = []
        for folder in python_path_folders(launch.request.env):
            if any(_inside(folder, m) for m in mounted):
                continue
            own = ", ".join(self.own_mounts) or "nothing"
            also = f"; {self.other_mounts}" if self.other_mounts else ""
            notes.append(
                f"-e PYTHONPATH names {folder}, which {self.kind} does not mount on its own "
                f"(it mounts: {own}{also}): add -B {folder}, or the ranks cannot import from it"
            )
        return notes

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The variables srun runs with so that the container sees `env`."""
        return env

    def modules(self, launch: Launch) -> list[str]:
        """The runtime's modules for this launch (Shifter's); none by default."""
        return []

    def wrap(self, inv: Invocation) -> Wrapped:
        raise NotImplementedError

    # What the launch checks ask of a runtime (launcher/checks/registry.py): None means all is well.

    def gpu_gap(self, launch: Launch) -> str | None:
        """Why the container lacks the GPUs the job asks for, with the fix."""
        if self.profile.gpu:
            return None
        without = self.gpu_flag or "GPUs"
        return f"{self.kind} runs without {without} (gpu: false for it in site {launch.site.name}'s profile); set gpu: true for the {self.kind} runtime in the profile"

    def injects_host_mpi(self, launch: Launch) -> bool:
        """Whether the runtime swaps the site's MPI (Cray MPICH) into the container."""
        return False

    def missing_nccl_plugin(self, launch: Launch) -> str | None:
        """Why NCCL's network plugin is absent from the container although NCCL_NET is forced."""
        return None

    def brings_nccl_plugin(self, launch: Launch) -> str | None:
        """What puts NCCL's network plugin in the container for this launch (a module of the
        runtime's), which NCCL then loads by itself; None where nothing does."""
        return None

    def dropped_task_env(self, launch: Launch) -> str | None:
        """Why srun's per-task variables (SLURM_*, PMI_*) do not reach the program."""
        return None

    def module_problem(self, launch: Launch) -> Verdict | None:
        """What is wrong with --module for this runtime."""
        if launch.request.modules:
            takers = ", ".join(
                k for cls in _classes().values() if cls.accepts_modules for k in cls.kinds
            )
            return fail(
                f"--module is a {takers} option; runtime {self.kind} has no modules (allowed with: {takers})"
            )
        return None


@functools.cache
def _classes() -> dict[str, type[Runtime]]:
    """kind -> the Runtime class serving it, from the modules of this package."""
    return {kind: cls for cls in classes_in(__name__, __path__, Runtime) for kind in cls.kinds}


@functools.cache
def _class_for(kind: str) -> type[Runtime] | None:
    """The class serving `kind`, loading only its own module where that module is named for
    it (podman_hpc.py serves podman-hpc): the other runtimes' modules are about 7 ms of a dry
    run (bench/dryrun.py). A kind served under another name (singularity, by apptainer.py)
    is looked up in every module."""
    name = kind.replace("-", "_")
    if name in room_names(__path__):  # a name this package has, never a path from a profile
        own = [c for c in classes_in(__name__, __path__, Runtime, [name]) if kind in c.kinds]
        if own:
            return own[0]
    return _classes().get(kind)


def kinds() -> list[str]:
    """Every runtime kind a site profile or --runtime may name."""
    return list(_classes())


def findable() -> list[tuple[str, type[Runtime]]]:
    """(kind, class) of the runtimes `sites probe` can find, in the order a profile prefers."""
    found = [
        (kind, cls)
        for kind, cls in _classes().items()
        if kind in cls.programs or cls.srun_option is not None
    ]
    return sorted(found, key=lambda item: item[1].probe_rank)


def profiles() -> tuple[type[RuntimeProfile], ...]:
    """The profile model of each runtime (a site profile's runtime entries are one of them)."""
    return tuple(dict.fromkeys(cls.profile_model for cls in _classes().values()))


def profile_for(kind: str) -> type[RuntimeProfile] | None:
    """The profile model of a runtime kind; None for a kind no runtime serves."""
    cls = _class_for(kind)
    return cls.profile_model if cls is not None else None


def default_profile(kind: str, **values: Any) -> RuntimeProfile:
    """The settings of a runtime kind a profile does not configure."""
    cls = _class_for(kind)
    if cls is None:
        raise UserError(f"--runtime: unknown runtime {kind!r} (allowed: {', '.join(kinds())})")
    return cls.profile_model.model_validate({"kind": kind, **values})


def runtime(profile: RuntimeProfile) -> Runtime:
    """The runtime a profile entry configures."""
    cls = _class_for(profile.kind)
    assert cls is not None, profile.kind  # a profile's kind is one its model allows
    return cls(profile)


def working_directory() -> str:
    """The current directory, or a one-line error when it was deleted under us."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise UserError(
            "the current directory no longer exists: cd to an existing directory and run again"
        ) from None


TOOL_FOLDER = ".hvd-container"  # in the working directory: the tool's files that jobs read


def tool_folder(purpose: str) -> Path:
    """The working directory's .hvd-container, made private (core.files.private_folder)."""
    return private_folder(Path(working_directory()), TOOL_FOLDER, purpose)


BIND_SYNTAX = ":,"  # what -b/-v SRC:DST[:OPTS] and -B lists split on


def _own_mount(name: str) -> str:
    """A folder of `Runtime.own_mounts` as a path here."""
    if name == "~":
        return os.path.realpath(os.path.expanduser("~"))
    if name == ".":
        return os.path.realpath(working_directory())
    return os.path.realpath(name)


def _inside(path: str, folder: str) -> bool:
    return (path.rstrip("/") + "/").startswith(folder.rstrip("/") + "/")


def python_path_folders(env: dict[str, str]) -> list[str]:
    """The folders of `-e PYTHONPATH=...` that are here (absolute, existing): the ranks import
    from them, so the container must see them."""
    found = []
    for entry in env.get("PYTHONPATH", "").split(":"):
        if entry.startswith("/") and os.path.isdir(entry):
            found.append(os.path.realpath(entry))
    return list(dict.fromkeys(found))


def bind_working_directory(launch: Launch) -> Prepared:
    """For runtimes that mount nothing on their own (ch-run, podman-hpc): the working directory
    (and a script's folder outside it, and the folders of -e PYTHONPATH) bound at the same
    path and made the working directory, or the program would start in / without the user's
    files (or import nothing from the folders it was told to)."""
    cwd = working_directory()
    binds = [one for item in launch.request.binds for one in split_binds(item)]
    # each folder: what it is, and the fix where its path holds the bind syntax
    wanted = {cwd: ("the working directory", "run from a folder")}
    script = Path(launch.request.script)
    moved = None
    if script.suffix == ".py" and script.is_file():
        # a script outside the working directory must be visible in the container too
        parent = str(script.resolve().parent)
        if not _inside(parent, cwd):
            wanted[parent] = ("the script's folder", "move the script to a folder")
            moved = str(script.resolve())
    notes = []
    for folder in python_path_folders(launch.request.env):
        if any(_inside(folder, seen) for seen in wanted):
            continue
        over = guard.bind_refusal(folder, folder)  # the image's /usr, /opt, or all of /
        if over is not None:
            notes.append(
                f"-e PYTHONPATH names {folder}, which is not bound: it {over.why.split(' (')[0]} "
                "(the container's own folder of that name is what the ranks see)"
            )
            continue
        wanted[folder] = ("-e PYTHONPATH's folder", "name a folder")
    for path, (what, fix) in wanted.items():
        bad = sorted({c for c in path if c in BIND_SYNTAX})
        if bad:
            raise UserError(
                f"{what} {path!r} holds {' and '.join(repr(c) for c in bad)}, which the "
                f"runtime's bind option reads as its own syntax (SRC:DST, a list): {fix} "
                "whose path has neither"
            )
    added = [f"{path}:{path}" for path in wanted if not any(source_of(b) == path for b in binds)]
    return Prepared(
        launch.image, binds=added, workdir=launch.request.workdir or cwd, script=moved, notes=notes
    )
