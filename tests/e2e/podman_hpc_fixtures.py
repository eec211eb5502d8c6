"""podman-hpc's stores as the e2e tests use them: its command, and the removal of what a test
module put there (each image is ~2 GB in the store plus its squashed copy, and the suite must fit
a CI machine's disk)."""

from __future__ import annotations

import getpass
import os
import subprocess
from collections.abc import Iterator

import pytest
from build_fixtures import REGISTRY

from tests.e2e.sif_fixtures import run_testbed


def podman_hpc_cmd(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman-hpc", *argv], capture_output=True, text=True,
        env={**os.environ, "USER": getpass.getuser()},  # podman-hpc needs one
    )  # fmt: skip


def forget(*refs: str) -> None:
    """Remove the images from both stores, then the layers only they used (a build's
    intermediate images among them). A name that is not there is fine."""
    for ref in refs:
        podman_hpc_cmd("rmsqi", ref)
        podman_hpc_cmd("rmi", "--force", ref)
    podman_hpc_cmd("image", "prune", "--force")


@pytest.fixture(scope="session")
def cpu_migrated(cpu_image: str, local_registry: str) -> Iterator[str]:
    """The CPU image (Horovod and torch) pushed by `convert --to podman-hpc` and migrated into
    the squashed store, once for the session: the Horovod trainings and the torch.distributed
    ones under podman-hpc all start from it (one 2 GB migration, not one per image)."""
    run_testbed("podman-hpc.sh", "up")
    ref = f"{REGISTRY}/{cpu_image}"
    from tests.e2e.slurm_fixtures import cli

    try:
        result = cli(
            "convert", cpu_image, "--to", "podman-hpc", "--registry", REGISTRY, timeout=1800
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"ready: {ref}" in result.stdout + result.stderr
        yield ref
    finally:
        forget(ref)
