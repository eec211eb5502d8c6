"""podman-hpc for real: Debian's podman and PyPI's podman-hpc (testbed/podman-hpc.sh) on this
machine. `convert --to podman-hpc` pushes the CPU image to the local registry and runs the
real `podman-hpc pull`, which migrates it into the squashed store (a static mksquashfs run
inside the image); `run --runtime podman-hpc` then trains across the local cluster's two nodes
from that store, one `podman-hpc run` per rank under srun: over MPI (srun --mpi=pmix; the
local profile binds Slurm's TmpFS, where each node's PMIx server keeps its files, and the
launcher passes the PMIX_* variables) and over Horovod's Gloo controller."""

from __future__ import annotations

import getpass
import os
import subprocess
from pathlib import Path

import pytest
from build_fixtures import REGISTRY

from tests.e2e.sif_fixtures import run_testbed
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    job_dir,
    slurm_cluster,
)
from tests.e2e.test_run_training import _check_training, _train

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def podman_hpc() -> None:
    run_testbed("podman-hpc.sh", "up")


@pytest.fixture(scope="module")
def migrated(cpu_image: str, local_registry: str, podman_hpc: None) -> str:
    result = cli("convert", cpu_image, "--to", "podman-hpc", "--registry", REGISTRY, timeout=1800)
    assert result.returncode == 0, result.stdout + result.stderr
    ref = f"{REGISTRY}/{cpu_image}"
    assert f"ready: {ref}" in result.stdout + result.stderr
    return ref


def test_convert_migrates_the_image_into_the_squashed_store(migrated: str) -> None:
    listing = subprocess.run(
        ["podman-hpc", "images", "--format", "{{.Repository}}:{{.Tag}} {{.ReadOnly}}"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "USER": getpass.getuser()},  # podman-hpc needs one
    )  # fmt: skip
    assert f"{migrated} true" in listing.stdout.splitlines(), listing.stdout
    # the squashed copy is a real SquashFS file (lz4, made by the static mksquashfs)
    squashes = list(Path("/tmp/storage/overlay/l").glob("*.squash"))
    assert squashes and all(p.read_bytes()[:4] == b"hsqs" for p in squashes)


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_two_node_training_under_podman_hpc(
    controller: str,
    migrated: str,
    slurm_cluster: str,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    checkpoint = job_dir / "podman" / "model.pt"
    result = _train(
        "--runtime", "podman-hpc", "--controller", controller,
        "--image", migrated, checkpoint=checkpoint, image=None, cwd=job_dir,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    _check_training(result.stdout, controller, checkpoint)
