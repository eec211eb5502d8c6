"""An arm64 image made here for real, under emulation (Grace Hopper's architecture).

testbed/qemu.sh registers Debian's qemu-user-static with binfmt_misc (fix-binary, so arm64
programs run in containers and on the cluster's nodes too). A small recipe with `arch: arm64`
(Python and a NumPy wheel, no framework) is locked for aarch64 by uv, its Debian base
bootstrapped for arm64 (debootstrap's second stage under qemu, loaded with its architecture),
built by the Docker engine for linux/arm64, verified by running its checks under emulation,
converted to a SIF whose descriptor says arm64, and run on both nodes of the local cluster
through a profile that names their partition arm64."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests._json_records import records
from tests.e2e.sif_fixtures import ROOT, run_testbed
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    job_dir,
    slurm_cluster,
)

pytestmark = pytest.mark.e2e

NAME = "hvd-test-arm64-mini"
RECIPE = f"""extends: cpu-bookworm
name: {NAME}
description: arm64 Python 3.11 and NumPy, no framework (the arm64 path end to end)
arch: arm64
mpi: null
pytorch: null
horovod: null
checks:
  - python -c 'import platform, numpy; assert platform.machine() == "aarch64", platform.machine()'
"""


@pytest.fixture(scope="module")
def qemu() -> None:
    run_testbed("qemu.sh", "up")


@pytest.fixture(scope="module")
def arm64_recipe(qemu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe, locked for aarch64 by `hvd-container lock` (uv)."""
    recipe = tmp_path_factory.mktemp("arm64") / f"{NAME}.yaml"
    recipe.write_text(RECIPE)
    locked = cli("lock", str(recipe), timeout=600)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    return recipe


def test_the_lock_is_resolved_for_aarch64(arm64_recipe: Path) -> None:
    lock = arm64_recipe.with_suffix(".lock").read_text()
    assert "python 3.11, aarch64-manylinux_2_36" in lock.splitlines()[1]
    assert "numpy==" in lock


@pytest.fixture(scope="module")
def arm64_built(arm64_recipe: Path, base_image: str) -> list[dict]:
    # an earlier run's image would be up to date, built without a step to check: drop its
    # name (its layers stay, so the steps run again, cached)
    subprocess.run(
        ["docker", "image", "rm", "--no-prune", f"{NAME}:1"], capture_output=True, check=False
    )
    proc = cli("build", str(arm64_recipe), "--progress", "json", timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    return records(proc.stdout)


def test_the_arm64_image_is_built_from_an_arm64_base_and_verified_under_emulation(
    arm64_built: list[dict],
) -> None:
    steps = [r["text"] for r in arm64_built if r["event"] == "step"]
    assert any("FROM --platform=linux/arm64 hvd-base/debian:bookworm-arm64" in s for s in steps)
    (result,) = [r for r in arm64_built if r["event"] == "result"]
    assert result["labels"]["org.hvd-container.verified"] == "true"
    assert result["labels"]["org.hvd-container.arch"] == "arm64"
    verify = cli("verify", f"{NAME}:1", "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    checked = json.loads(verify.stdout.strip().splitlines()[-1])
    assert checked["ok"] and checked["facts"]["org.hvd-container.arch"] == "arm64", checked


@pytest.fixture(scope="module")
def arm64_sif(arm64_built: list[dict], tmp_path_factory: pytest.TempPathFactory) -> Path:
    sif = tmp_path_factory.mktemp("arm64-sif") / f"{NAME}_1.sif"
    proc = cli("convert", f"{NAME}:1", "--to", "sif", "-o", str(sif), timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return sif


def test_the_sif_says_arm64(arm64_sif: Path) -> None:
    inspected = cli("inspect", str(arm64_sif))
    assert inspected.returncode == 0, inspected.stderr
    assert "arch:   arm64" in inspected.stdout.splitlines(), inspected.stdout


def test_the_arm64_sif_runs_on_both_nodes_of_an_arm64_partition(
    arm64_sif: Path,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    profile = arm64_profile(job_dir)  # the same nodes, emulating Grace's architecture
    probe = "import platform, socket, numpy; print(socket.gethostname(), platform.machine())"
    result = cli(
        "run", "--site", str(profile), "--image", str(arm64_sif), "-N", "2",
        "--ntasks-per-node", "1", "python", "-c", probe, cwd=job_dir, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.split()) == ["aarch64", "aarch64", "node1", "node2"], result.stdout


TWIN = "cpu-bookworm-torch-arm64"


def arm64_profile(folder: Path) -> Path:
    """The local cluster's profile with its nodes said to be arm64 (Grace's architecture,
    emulated by qemu there)."""
    local = (ROOT / "launcher" / "sites" / "local.yaml").read_text()
    profile = folder / "local-arm64.yaml"
    profile.write_text(local.replace("name: local\n", "name: local-arm64\n")
                       .replace("arch: host\n", "arch: arm64\n"))  # fmt: skip
    return profile


@pytest.fixture(scope="module")
def arm64_torch_sif(qemu: None, base_image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The arm64 torch twin built under emulation, verified, as a SIF."""
    built = cli("build", TWIN, "--progress", "plain", timeout=5400)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr
    sif = tmp_path_factory.mktemp("arm64-torch") / f"{TWIN}_1.sif"
    converted = cli("convert", f"{TWIN}:1", "--to", "sif", "-o", str(sif), timeout=1800)
    assert converted.returncode == 0, converted.stdout + converted.stderr
    return sif


@pytest.mark.arm64
def test_the_arm64_torch_twin_trains_ddp_on_two_nodes_under_emulation(
    arm64_torch_sif: Path,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    from tests.e2e.test_run_torch import EXAMPLES, check_torch_training

    checkpoint = job_dir / "arm64" / "model.pt"
    result = cli(
        "run", "--site", str(arm64_profile(job_dir)), "--image", str(arm64_torch_sif),
        "--controller", "torch", "-N", "2", "--ntasks-per-node", "1",
        str(ROOT / "examples" / EXAMPLES["ddp"]), "--epochs", "3",
        "--checkpoint", str(checkpoint), cwd=job_dir, timeout=3600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    check_torch_training(result.stdout, "DDP", checkpoint, epochs=3)
