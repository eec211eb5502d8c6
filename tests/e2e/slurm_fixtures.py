"""Session fixtures for the Slurm/run e2e tests: the local cluster, Charliecloud, small images.

Test modules import the fixtures they use (`from tests.e2e.slurm_fixtures import ...`).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.sif_fixtures import ROOT, import_image, run_testbed, shell_rootfs

SHELL_LABELS = {
    "org.hvd-container.arch": "amd64",
    "org.hvd-container.recipe.name": "shell-test",
    "org.hvd-container.horovod.controllers": "mpi,gloo",
    "org.hvd-container.mpi.pmi": "pmix",
}


def cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """`hvd-container ARGS` as a user runs it (outside any allocation unless env says so)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run(
        [sys.executable, "-m", "hvd_container", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """The 2-node cluster of testbed/slurm.sh, up for the session; returns the node prefix."""
    run_testbed("slurm.sh", "up")
    return "node"


@pytest.fixture(scope="session")
def charliecloud_runtime() -> None:
    run_testbed("charliecloud.sh", "up")


@pytest.fixture(scope="session")
def shell_dir_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory image: /bin/sh (the host's dash) and its libraries, plus a labels file."""
    root = tmp_path_factory.mktemp("images") / "shell"
    with tarfile.open(fileobj=io.BytesIO(shell_rootfs()), mode="r") as tar:
        tar.extractall(root, filter="fully_trusted")
    # coreutils' sleep needs only libc, which the image already has
    shutil.copy2(shutil.which("sleep") or "/bin/sleep", root / "bin" / "sleep")
    meta = root / ".singularity.d"
    (meta / "env").mkdir(parents=True)
    (meta / "env" / "10-docker2singularity.sh").write_text(
        "#!/bin/sh\nexport GREETING='hello from the image'\n"
    )
    import json

    (meta / "labels.json").write_text(json.dumps(SHELL_LABELS))
    return root


@pytest.fixture(scope="session")
def shell_sif(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tiny shell image through Docker and `hvd-container convert --to sif`."""
    import docker

    run_testbed("docker.sh", "up")
    run_testbed("sif-tools.sh", "up")
    client: Any = docker.from_env()
    tag = import_image(client, "hvd-test/run-shell:1", shell_rootfs(), SHELL_LABELS)
    target = tmp_path_factory.mktemp("sif") / "shell.sif"
    result = cli("convert", tag, "--to", "sif", "-o", str(target))
    assert result.returncode == 0, result.stderr
    return target


@pytest.fixture()
def job_dir(tmp_path: Path) -> Path:
    """A working directory on the shared filesystem (the nodes see the host's files)."""
    return tmp_path


def _drop_sifs_of_gone_images(directory: Path, client: Any) -> None:
    """A rebuilt image leaves its old SIF behind (~0.7 GB each): remove the SIFs of image ids
    Docker no longer has (session after session they would fill the disk)."""
    current = {image.id.split(":", 1)[-1][:16] for image in client.images.list(all=True)}
    for sif in directory.glob("*.sif"):
        if re.fullmatch(r"[0-9a-f]{16}", sif.stem) and sif.stem not in current:
            sif.unlink(missing_ok=True)


def _sif_path(client: Any, tag: str) -> Path:
    """Where sif_of keeps the SIF of the image tag names now (by its id)."""
    image_id = client.images.get(tag).id.split(":", 1)[-1][:16]
    return Path(os.environ.get("HVD_E2E_CACHE", "/var/tmp/hvd-e2e")) / "sif" / f"{image_id}.sif"


def converted_sif(tag: str) -> Path | None:
    """The SIF sif_of made of the image tag names now, if an earlier test made it."""
    import docker

    try:
        path = _sif_path(docker.from_env(), tag)
    except docker.errors.DockerException:  # no engine yet, or no such image
        return None
    return path if path.is_file() else None


def sif_of(tag: str) -> Path:
    """A Docker image as a SIF, converted once per image id.

    Kept under /var/tmp/hvd-e2e so that later sessions reuse the conversion of the same image.
    """
    import docker

    run_testbed("sif-tools.sh", "up")
    client: Any = docker.from_env()
    target = _sif_path(client, tag)
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        _drop_sifs_of_gone_images(target.parent, client)
        result = cli("convert", tag, "--to", "sif", "-o", str(target), timeout=1800)
        assert result.returncode == 0, result.stderr
    return target


@pytest.fixture(scope="session")
def cpu_sif(request: pytest.FixtureRequest) -> Path:
    """The CPU training image as a SIF: the build fixture's `cpu_image`, or the Docker tag in
    $HVD_E2E_CPU_IMAGE."""
    return sif_of(os.environ.get("HVD_E2E_CPU_IMAGE") or request.getfixturevalue("cpu_image"))


@pytest.fixture(scope="session")
def torch_sif(request: pytest.FixtureRequest) -> Path:
    """The CPU twin without Horovod (recipe cpu-bookworm-torch) as a SIF."""
    return sif_of(request.getfixturevalue("torch_image"))


@pytest.fixture(scope="session")
def tf_sif(request: pytest.FixtureRequest) -> Path:
    """The TensorFlow + PyTorch CPU image (recipe cpu-bookworm-tf-pt) as a SIF."""
    return sif_of(request.getfixturevalue("tf_image"))


@pytest.fixture(scope="session")
def lightning_packages() -> Path:
    """Lightning for the CPU image (which has torch but not Lightning), bound in at run time."""
    target = Path(os.environ.get("HVD_E2E_CACHE", "/var/tmp/hvd-e2e")) / "lightning-site-2.6.6"
    if not target.is_dir():
        partial = target.with_name(target.name + ".part")
        shutil.rmtree(partial, ignore_errors=True)
        # Pinned: --no-deps takes no resolver's word, so the set must be known to fit together.
        packages = ["lightning==2.6.6", "lightning-utilities==0.15.3", "torchmetrics==1.9.0",
                    "fsspec==2026.9.0", "tqdm==4.70.1", "pyyaml==6.0.3", "packaging==26.3",
                    "typing-extensions==4.16.0"]  # fmt: skip
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
             str(partial), *packages],
            check=True,
        )  # fmt: skip
        os.replace(partial, target)
    return target


def lightning_run(image: Path, packages: Path, nodes: int) -> list[str]:
    """`run` of the CPU image on the local cluster, one rank a node, lightning_packages bound
    into the job's containers."""
    return [
        "run", "--site", "local", "--image", str(image), "-N", str(nodes), "--ntasks-per-node",
        "1", "--bind", f"{packages}:/opt/lightning", "--env", "PYTHONPATH=/opt/lightning",
    ]  # fmt: skip
