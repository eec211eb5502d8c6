"""Helpers for the conversion e2e tests: testbed services and small real images."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LABELS = {"org.hvd-container.arch": "amd64", "org.hvd-container.versions.python": "3.11"}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process (one-line errors and exit codes as users see them)."""
    return subprocess.run(
        [sys.executable, "-m", "hvd_container", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def run_testbed(script: str, *args: str) -> None:
    subprocess.run(["sh", str(ROOT / "testbed" / script), *args], check=True)


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"", mode: int = 0o644, **kw: Any) -> None:
    info = tarfile.TarInfo(name)
    info.type = kw.get("kind", tarfile.REGTYPE)
    info.mode = mode
    info.mtime = 1_600_000_000
    info.linkname = kw.get("linkname", "")
    info.size = len(data) if info.type == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data))


def shell_rootfs(extra_bytes: int = 0) -> bytes:
    """A tiny root filesystem: the host's dash as /bin/sh with the libraries it needs."""
    dash = Path(shutil.which("dash") or "/bin/dash").resolve()
    libs = re.findall(r"(/\S+) \(0x", subprocess.run(["ldd", str(dash)], capture_output=True,
                                                   text=True, check=True).stdout)  # fmt: skip
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("bin", "etc", "tmp", "lib", "lib64", "usr", "usr/lib", "opt"):
            _add(tar, directory, kind=tarfile.DIRTYPE, mode=0o755)
        _add(tar, "bin/sh", dash.read_bytes(), 0o755)
        _add(tar, "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
        _add(tar, "etc/group", b"root:x:0:\n")
        seen = set()
        for lib in libs:
            real = Path(lib).resolve()
            for name in {lib.lstrip("/"), str(real).lstrip("/")}:
                parent = str(Path(name).parent)
                if parent not in seen and parent not in ("lib", "lib64", "."):
                    _add(tar, parent, kind=tarfile.DIRTYPE, mode=0o755)
                    seen.add(parent)
            _add(tar, str(real).lstrip("/"), real.read_bytes(), 0o755)
            if lib != str(real):
                _add(tar, lib.lstrip("/"), kind=tarfile.SYMTYPE, linkname=str(real))
        if extra_bytes:
            # Incompressible filler so that a conversion takes long enough to interrupt.
            _add(tar, "opt/filler.bin", os.urandom(extra_bytes))
    return buf.getvalue()


ENTRYPOINT = ["/bin/sh", "-c", 'printf "[%s]" "$GREETING" "$@"', "sh"]


def import_image(client: Any, tag: str, rootfs: bytes, labels: dict[str, str] | None = None) -> str:
    """docker import with ENV, ENTRYPOINT, CMD and labels (as a build would record them)."""
    import json

    repository, _, version = tag.rpartition(":")
    changes = [
        'ENV GREETING="hello world"',
        f"ENTRYPOINT {json.dumps(ENTRYPOINT)}",
        'CMD ["default arg"]',
    ]
    changes += [f"LABEL {k}={json.dumps(v)}" for k, v in (labels or {}).items()]
    with contextlib.suppress(Exception):  # a previous run's copy would be left dangling
        client.images.remove(tag, force=True)
    client.api.import_image_from_data(rootfs, repository=repository, tag=version, changes=changes)
    return tag


@contextlib.contextmanager
def mounted(sif: Path, offset: int, where: Path) -> Iterator[Path]:
    """The SIF's root filesystem mounted with squashfuse at the partition offset."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["squashfuse", "-o", f"offset={offset}", str(sif), str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["fusermount", "-u", str(where)], check=False)
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def image_mtimes(client: Any, image: str, path: str) -> dict[str, int]:
    """Entry name -> mtime of path (a file or a directory tree) in the image's filesystem, read
    from the tar the engine streams for it (`docker cp`: the same merged view as docker export)."""
    container = client.containers.create(image, entrypoint=["/"], command=[])
    try:
        chunks, _stat = container.get_archive(path)
        data = b"".join(chunks)
    finally:
        container.remove(force=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {member.name: int(member.mtime) for member in tar.getmembers()}


def file_in_image(image: str, path: str) -> bytes:
    """The file's bytes as `docker run` attached to the container's stdout prints them. docker-py's
    containers.run follows the log stream while the container runs instead, and that stream may
    end before the last chunk: a JSON document's closing brace went missing that way."""
    done = subprocess.run(["docker", "run", "--rm", "--entrypoint", "cat", image, path],
                          capture_output=True, timeout=120, check=True)  # fmt: skip
    return done.stdout


def extract_from_sif(sif: Path, offset: int, paths: list[str], where: Path) -> Path:
    """unsquashfs the given paths of the SIF's partition into where (which must not exist);
    unsquashfs restores each file's mtime, so os.stat on the result reads the squashfs inode's."""
    subprocess.run(
        ["unsquashfs", "-no-progress", "-o", str(offset), "-d", str(where), str(sif), *paths],
        check=True, capture_output=True,
    )  # fmt: skip
    return where


def ch_run(
    root: Path, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {"PATH": "/usr/bin:/bin", "USER": "root", "HOME": "/tmp", **(env or {})}
    return subprocess.run(["ch-run", str(root), "--", *argv], capture_output=True, text=True,
                          env=full_env, timeout=600)  # fmt: skip


@pytest.fixture(scope="session")
def docker_client() -> Any:
    import docker

    run_testbed("docker.sh", "up")
    return docker.from_env()


@pytest.fixture(scope="session")
def sif_tools() -> None:
    run_testbed("sif-tools.sh", "up")


@pytest.fixture(scope="session")
def charliecloud() -> None:
    run_testbed("charliecloud.sh", "up")


@pytest.fixture(scope="session")
def shell_image(docker_client: Any) -> Iterator[str]:
    import docker

    tag = import_image(docker_client, "hvd-test/sif-shell:1", shell_rootfs(), LABELS)
    yield tag
    # Test modules import this fixture separately: the other copy may have removed it already.
    with contextlib.suppress(docker.errors.NotFound):
        docker_client.images.remove(tag, force=True)
