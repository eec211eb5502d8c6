"""Session fixtures shared by the e2e tests: real services started through testbed/ scripts.

`docker_engine` (dockerd), `local_registry` (registry v2 on 127.0.0.1:5000), `base_image`
(hvd-base/debian:bookworm from debootstrap), `cpu_image` (the built, verified CPU recipe
image, reused by other e2e tests) and `tf_image` (its sibling with TensorFlow and PyTorch).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from build_fixtures import (
    CPU_RECIPE,
    GPU_RECIPE,
    GPU_TORCH_RECIPE,
    REGISTRY,
    TF_RECIPE,
    TORCH_RECIPE,
    hvd,
    testbed,
)

from hvd_container.facts import RECIPE_NAME


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[str]:
    testbed("docker.sh", "up")
    yield "unix:///var/run/docker.sock"
    # Every run leaves the images it replaced untagged (a rebuilt tag, the test recipes'
    # variants): remove those of hvd-container recipes, never anybody else's.
    subprocess.run(
        ["docker", "image", "prune", "--force", "--filter", f"label={RECIPE_NAME}"],
        capture_output=True,
        check=False,
    )


# Images unpacked for ch-run stay in the session's cache (tests/conftest.py) so that the next run
# of the same SIF starts at once; all of them (2 to 4 GB each, one per image a run used) would
# not fit a CI machine's disk beside the images, SIFs and stores. After each module the newest
# that fit this budget stay; an older one is unpacked again if asked for (~15 s for 2 GB).
UNPACKED_BUDGET = 4 * 2**30


@pytest.fixture(autouse=True, scope="module")
def _unpacked_images_within_budget() -> Iterator[None]:
    yield
    from hvd_container.launcher.runtimes import charliecloud

    kept: set[str] = set()
    total = 0
    for entry in charliecloud.entries():  # newest first
        if entry.partial:
            continue  # prune removes it once no process can still be writing it
        if total + entry.size > UNPACKED_BUDGET:
            break
        kept.add(entry.key)
        total += entry.size
    charliecloud.prune(keep=kept)


@pytest.fixture(scope="session")
def local_registry() -> str:
    testbed("registry.sh", "up")
    return REGISTRY


@pytest.fixture(scope="session")
def api(docker_engine: str) -> Any:
    """The Docker engine's low-level API client (docker-py)."""
    from hvd_container.containers.engine.docker_api import docker_client

    return docker_client()


@pytest.fixture(scope="session")
def base_image(docker_engine: str) -> str:
    testbed("base-image.sh", "bookworm")
    return "hvd-base/debian:bookworm"


def built(recipe: str) -> str:
    """The recipe built for real and verified (a cache hit when nothing changed); its tag."""
    proc = hvd("build", recipe, "--progress", "plain")
    if proc.returncode != 0:
        pytest.fail(f"building {recipe} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    from hvd_container.containers.recipe_loader import load_recipe

    return load_recipe(recipe).image_tag


@pytest.fixture(scope="session")
def cpu_image(base_image: str) -> str:
    return built(CPU_RECIPE)


@pytest.fixture(scope="session")
def tf_image(base_image: str) -> str:
    """The TensorFlow/Keras sibling: Horovod's TensorFlow ops compiled for real."""
    return built(TF_RECIPE)


@pytest.fixture(scope="session")
def torch_image(base_image: str) -> str:
    """cpu-bookworm without Horovod: torch.distributed over gloo (shares cpu-bookworm's layers
    up to its locked pip install)."""
    return built(TORCH_RECIPE)


@pytest.fixture(scope="session")
def gpu_torch_image(base_image: str) -> str:
    """gpu-bookworm without Horovod (no compile step): `make test-gpu` asks."""
    return built(GPU_TORCH_RECIPE)


@pytest.fixture(scope="session")
def gpu_image(base_image: str) -> str:
    """The NCCL image (recipe gpu-bookworm): about 45 min cold, so only `make test-gpu` asks."""
    return built(GPU_RECIPE)
