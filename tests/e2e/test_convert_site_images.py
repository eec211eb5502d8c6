"""`convert --to shifter|podman-hpc`: real push to the real local registry, then the site tool.

Shifter's image gateway and podman-hpc cannot run here: tests/e2e/standins/ holds STAND-INS
that reproduce their output and exit codes as their sources have them (shifterimg: FAILURE
with exit 0; podman-hpc: "Pull failed." with podman's exit code, exit 0 before 1.0.2) and ask
the real registry whether the image exists.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hvd_container.containers.convert.site_images import publish_to_site

from hvd_container.core.errors import StepFailed
from tests.e2e.sif_fixtures import (  # noqa: F401 (fixtures)
    cli,
    docker_client,
    run_testbed,
    shell_image,
)

pytestmark = pytest.mark.e2e

STANDINS = Path(__file__).resolve().parent / "standins"
REGISTRY = "127.0.0.1:5000"


@pytest.fixture(scope="session")
def registry(docker_client: Any) -> Iterator[str]:  # noqa: F811
    run_testbed("registry.sh", "up")
    yield REGISTRY
    # The pushes tagged the test image with the registry's name: drop that tag again.
    for image in docker_client.images.list(name=f"{REGISTRY}/hvd-test/*"):
        for tag in image.tags:
            docker_client.images.remove(tag, force=True)


@pytest.fixture()
def standin_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = {
        "PATH": f"{STANDINS}{os.pathsep}{os.environ['PATH']}",
        "SHIFTER_STANDIN_STATE": str(tmp_path / "shifter"),
        "PODMAN_HPC_STANDIN_STATE": str(tmp_path / "podman"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def calls(env: dict[str, str], key: str) -> list[str]:
    return (Path(env[key]) / "calls.log").read_text().splitlines()


def test_shifter_push_pull_lookup(
    shell_image: str,  # noqa: F811
    registry: str,
    standin_env: dict[str, str],
) -> None:
    result = cli("convert", shell_image, "--to", "shifter", "--registry", registry, env=standin_env)
    assert result.returncode == 0, result.stderr
    ref = f"docker:{registry}/hvd-test/sif-shell:1"
    assert f"ready: {ref}" in result.stdout
    for status in ("PENDING", "PULLING", "CONVERSION", "READY"):
        assert f"gateway: {status}" in result.stdout
    assert calls(standin_env, "SHIFTER_STANDIN_STATE") == [
        f"shifterimg pull {ref}",
        f"shifterimg lookup {ref}",
    ]


def test_shifter_failure_with_exit_0_is_a_failure(
    registry: str, standin_env: dict[str, str]
) -> None:
    with pytest.raises(StepFailed, match="reported FAILURE"):
        publish_to_site(
            "hvd-test/never-pushed:1",
            runtime="shifter",
            registry=registry,
            push=lambda image, registry: None,
        )


def test_shifter_gateway_down(registry: str, standin_env: dict[str, str], monkeypatch: Any) -> None:
    monkeypatch.setenv("SHIFTER_STANDIN_DOWN", "1")
    with pytest.raises(StepFailed, match="exit 1"):
        publish_to_site(
            "hvd-test/x:1", runtime="shifter", registry=registry, push=lambda image, registry: None
        )


def test_podman_hpc_pull_migrate_and_remigrate(
    shell_image: str,  # noqa: F811
    registry: str,
    standin_env: dict[str, str],
) -> None:
    ref = f"{registry}/hvd-test/sif-shell:1"
    for _ in range(2):
        result = cli("convert", shell_image, "--to", "podman-hpc", "--registry", registry,
                     env=standin_env)  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert f"ready: {ref}" in result.stdout
    log = calls(standin_env, "PODMAN_HPC_STANDIN_STATE")
    assert [line.split()[1] for line in log] == [
        "images", "pull", "images",  # first time: nothing squashed yet
        "images", "rmsqi", "pull", "images",  # same tag again: rmsqi before migrating
    ]  # fmt: skip
    assert f"podman-hpc rmsqi {ref}" in log


@pytest.mark.parametrize("pre_1_0_2", [False, True])
def test_podman_hpc_pull_failed_is_a_failure(
    registry: str, standin_env: dict[str, str], monkeypatch: Any, pre_1_0_2: bool
) -> None:
    if pre_1_0_2:  # "Pull failed." and exit 0: only the output tells
        monkeypatch.setenv("PODMAN_HPC_STANDIN_PRE_1_0_2", "1")
    with pytest.raises(StepFailed, match="Pull failed"):
        publish_to_site(
            "hvd-test/never-pushed:1",
            runtime="podman-hpc",
            registry=registry,
            push=lambda image, registry: None,
        )


def test_missing_registry_is_a_clear_error(
    shell_image: str,  # noqa: F811
    standin_env: dict[str, str],
) -> None:
    result = cli("convert", shell_image, "--to", "shifter", "--site", "local", env=standin_env)
    assert result.returncode == 2
    assert "--registry" in result.stderr and "images.registry" in result.stderr
