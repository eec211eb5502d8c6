"""Docker image -> SIF with Apptainer/Singularity where it is installed (login nodes).

`apptainer build x.sif docker-daemon://img:tag` when a Docker engine is reachable, else
`docker-archive://FILE` from a `docker save` tar. Never sudo. Apptainer first unpacks the image
in its temp dir (tar + rootfs + squashfs), so APPTAINER_TMPDIR is pointed at the candidate
directory with the most free space, and the build writes to a temporary name next to the target
that is renamed only on success.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from hvd_container.errors import StepFailed, UserError

TOOLS = ("apptainer", "singularity")


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


def build_env(tool: str, tmpdir: Path, base: Mapping[str, str]) -> dict[str, str]:
    """APPTAINER_TMPDIR (SINGULARITY_TMPDIR for singularity) on a disk with room."""
    env = dict(base)
    prefix = "SINGULARITY" if Path(tool).name == "singularity" else "APPTAINER"
    env[f"{prefix}_TMPDIR"] = str(tmpdir)
    return env


def pick_tmpdir(candidates: list[Path], need: int) -> Path:
    """The existing candidate with the most free space; UserError if none has `need` bytes."""
    usable = [p for p in candidates if p.is_dir() and os.access(p, os.W_OK)]
    if not usable:
        raise UserError("no writable temporary directory for Apptainer (set APPTAINER_TMPDIR)")
    best = max(usable, key=lambda p: shutil.disk_usage(p).free)
    free = shutil.disk_usage(best).free
    if free < need:
        raise UserError(
            f"Apptainer needs about {need / 1e9:.1f} GB of temporary space, {best} has "
            f"{free / 1e9:.1f} GB: set APPTAINER_TMPDIR to a larger disk or use --engine native"
        )
    return best


def tmpdir_candidates(target: Path, env: Mapping[str, str]) -> list[Path]:
    names = [env.get("APPTAINER_TMPDIR"), env.get("TMPDIR"), str(target.parent), "/tmp"]
    return [Path(n) for n in names if n]


@contextlib.contextmanager
def _temporary_target(target: Path) -> Iterator[Path]:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _image_size(image: str) -> int:
    import docker

    try:
        return int(docker.from_env().images.get(image).attrs.get("Size") or 0)
    except docker.errors.ImageNotFound:
        raise UserError(f"image {image!r} not found in the local Docker engine") from None
    except docker.errors.DockerException as exc:
        raise UserError(
            f"cannot reach the Docker engine for docker-daemon:// ({exc}); "
            f"pass --archive FILE (from `docker save`) instead"
        ) from None


def convert_with_apptainer(
    image: str,
    target: str | os.PathLike[str],
    *,
    archive: Path | None = None,
    run: Callable[..., subprocess.CompletedProcess[bytes]] = subprocess.run,
    on_step: Callable[[str], None] | None = None,
) -> Path:
    """Build target from the image with the apptainer/singularity on PATH."""
    import shlex

    target = Path(target)
    tool = find_tool()
    if archive is not None:
        if not archive.is_file():
            raise UserError(f"--archive {archive}: no such file")
        size = archive.stat().st_size
    else:
        size = _image_size(image)
    env = build_env(tool, pick_tmpdir(tmpdir_candidates(target, os.environ), 3 * size), os.environ)
    with _temporary_target(target) as tmp:
        argv = build_argv(tool, tmp, source_uri(image, archive))
        if on_step:
            on_step(f"running {shlex.join(argv)}")
        result = run(argv, env=env)
        if result.returncode != 0:
            raise StepFailed(f"{Path(tool).name} build failed (exit {result.returncode})")
    return target
