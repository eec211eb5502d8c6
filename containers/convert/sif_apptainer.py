"""Docker image -> SIF with Apptainer/Singularity where it is installed (login nodes).

`apptainer build x.sif docker-daemon://img:tag` when a Docker engine is reachable, else
`docker-archive://FILE` from a `docker save` tar. Never sudo. Apptainer first unpacks the image
in its temp dir (tar + rootfs + squashfs): a temp dir the user chose (APPTAINER_TMPDIR, or
SINGULARITY_TMPDIR, which Apptainer also honours) is used as given and only checked for room;
otherwise the candidate with the most free space is passed. The build writes to a temporary
name next to the target that is renamed only on success.

On Ctrl-C or SIGTERM the tool gets the same signal and a bounded time to remove its several-GB
build-temp directory (Apptainer's build does that on SIGINT/SIGTERM, then exits 1) before it is
killed; the temporary target is removed either way.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from hvd_container.containers.convert.output import SIF_MODE, check_output_path, creation_mode
from hvd_container.containers.engine import EngineError, open_engine

from hvd_container.core.errors import StepFailed, Terminated, UserError
from hvd_container.core.files import not_a_file

TOOLS = ("apptainer", "singularity")
# How long an interrupted build may take to clean up its temp dir before it is killed.
STOP_GRACE_SECONDS = 30.0


def find_tool(path: str | None = None) -> str:
    """The first of apptainer, singularity on PATH; UserError when neither is there."""
    for tool in TOOLS:
        found = shutil.which(tool, path=path)
        if found:
            return found
    raise UserError(
        "--engine apptainer: neither apptainer nor singularity is on PATH "
        "(use the default --engine native, or run on a login node that has them)"
    )


def with_tag(image: str) -> str:
    """docker-daemon:// needs an explicit tag."""
    last = image.rpartition("/")[2]
    return image if (":" in last or "@" in last) else f"{image}:latest"


def source_uri(image: str, archive: Path | None) -> str:
    return f"docker-archive://{archive}" if archive else f"docker-daemon://{with_tag(image)}"


def build_argv(tool: str, target: Path, uri: str) -> list[str]:
    """`apptainer build --force TARGET URI` (--force: the target is our own temp file)."""
    return [tool, "build", "--force", str(target), uri]


def tmpdir_variables(tool: str) -> tuple[str, ...]:
    """The temp-dir variables the tool reads, first wins (Apptainer falls back to SINGULARITY_)."""
    if Path(tool).name == "singularity":
        return ("SINGULARITY_TMPDIR",)
    return ("APPTAINER_TMPDIR", "SINGULARITY_TMPDIR")


def build_env(tool: str, tmpdir: Path, base: Mapping[str, str]) -> dict[str, str]:
    """base with the tool's own temp-dir variable set to tmpdir."""
    env = dict(base)
    env[tmpdir_variables(tool)[0]] = str(tmpdir)
    return env


def _free(path: Path) -> int:
    return shutil.disk_usage(path).free


def _room_error(where: str, need: int, free: int) -> UserError:
    return UserError(
        f"{where}: Apptainer needs about {need / 1e9:.1f} GB of temporary space there, it has "
        f"{free / 1e9:.1f} GB; point it at a larger disk or use --engine native"
    )


def check_tmpdir(variable: str, path: Path, need: int) -> Path:
    """The temp dir the user set in `variable`, used as given: UserError if unusable or small."""
    if not path.is_dir():
        raise UserError(f"{variable}={path}: no such directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{variable}={path}: not writable")
    free = _free(path)
    if free < need:
        raise _room_error(f"{variable}={path}", need, free)
    return path


def pick_tmpdir(candidates: list[Path], need: int, variable: str = "APPTAINER_TMPDIR") -> Path:
    """The existing candidate with the most free space; UserError if none has `need` bytes."""
    usable = [p for p in candidates if p.is_dir() and os.access(p, os.W_OK | os.X_OK)]
    if not usable:
        raise UserError(f"no writable temporary directory for Apptainer (set {variable})")
    best = max(usable, key=_free)
    free = _free(best)
    if free < need:
        raise _room_error(f"{best} (set {variable} to choose another)", need, free)
    return best


def tmpdir_candidates(target: Path, env: Mapping[str, str]) -> list[Path]:
    """Where a temp dir may go when the user chose none: TMPDIR, next to the target, /tmp."""
    names = [env.get("TMPDIR"), str(target.parent), "/tmp"]
    return [Path(n) for n in names if n]


def choose_tmpdir(tool: str, target: Path, env: Mapping[str, str], need: int) -> Path:
    """The user's APPTAINER_TMPDIR/SINGULARITY_TMPDIR as given, else the roomiest candidate."""
    variables = tmpdir_variables(tool)
    for variable in variables:
        if env.get(variable):
            return check_tmpdir(variable, Path(env[variable]), need)
    return pick_tmpdir(tmpdir_candidates(target, env), need, variables[0])


@contextlib.contextmanager
def _temporary_target(target: Path) -> Iterator[Path]:
    """A temp file next to target, renamed onto it (with a SIF's usual mode) on success."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    except OSError as exc:
        raise UserError(f"--output {target}: cannot write there: {exc.strerror}") from None
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp made it 0600, and the tool truncates the file in place, keeping that mode.
        os.chmod(tmp, creation_mode(SIF_MODE))
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _image_size(image: str) -> int:

    hint = "pass --archive FILE (from `docker save`) instead"
    try:
        info = open_engine().inspect(image)
    except UserError as exc:  # no engine to connect to
        raise UserError(f"{exc}; for docker-daemon:// {hint}") from None
    except EngineError as exc:
        reason = " ".join(str(exc).split())
        raise UserError(
            f"the Docker engine failed for docker-daemon:// ({reason}); {hint}"
        ) from None
    if info is None:
        raise UserError(f"image {image!r} not found in the local Docker engine")
    return int(info.get("Size") or 0)


def stop_signal(exc: BaseException) -> signal.Signals:
    """The signal that interrupted us: the CLI raises Terminated (a KeyboardInterrupt) for
    SIGTERM, a plain KeyboardInterrupt for Ctrl-C."""
    return signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT


def _stop(proc: subprocess.Popen[bytes], sig: signal.Signals, grace: float) -> None:
    """Pass sig on, wait up to grace seconds for the tool to clean up and exit, then kill it."""
    # After a Ctrl-C at a terminal the tool (in our process group) has SIGINT already; a second
    # one is harmless to Apptainer, whose handler runs once. A SIGINT or SIGTERM sent to our
    # pid alone reaches it only this way.
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    try:
        proc.wait(timeout=grace)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):  # too slow, or interrupted again
        proc.kill()
        proc.wait()


def run_build(argv: list[str], env: Mapping[str, str], grace: float = STOP_GRACE_SECONDS) -> int:
    """Run the build and return its exit code; on KeyboardInterrupt (Ctrl-C, or the CLI's
    SIGTERM) the tool is stopped as above before the interrupt goes on."""
    try:
        proc = subprocess.Popen(argv, env=dict(env))
    except OSError as exc:
        raise UserError(f"--engine apptainer: cannot run {argv[0]}: {exc.strerror}") from None
    try:
        return proc.wait()
    except KeyboardInterrupt as exc:
        _stop(proc, stop_signal(exc), grace)
        raise


def convert_with_apptainer(
    image: str,
    target: str | os.PathLike[str],
    *,
    archive: Path | None = None,
    grace: float = STOP_GRACE_SECONDS,
    on_step: Callable[[str], None] | None = None,
) -> Path:
    """Build target from the image with the apptainer/singularity on PATH."""

    target = check_output_path(Path(target), ".sif")
    if archive is not None:  # asked before the tool: a pipe or a device would hang or fill it
        if not archive.exists():
            raise UserError(f"--archive {archive}: no such file")
        problem = not_a_file(archive, "a `docker save` tar file")
        if problem:
            raise UserError(f"--archive {archive}: {problem}")
    tool = find_tool()
    size = archive.stat().st_size if archive is not None else _image_size(image)
    tmpdir = choose_tmpdir(tool, target, os.environ, 3 * size)
    env = build_env(tool, tmpdir, os.environ)
    with _temporary_target(target) as tmp:
        argv = build_argv(tool, tmp, source_uri(image, archive))
        if on_step:
            on_step(f"running {shlex.join(argv)}")
        returncode = run_build(argv, env, grace)
        if returncode != 0:
            raise StepFailed(f"{Path(tool).name} build failed (exit {returncode})")
    return target
