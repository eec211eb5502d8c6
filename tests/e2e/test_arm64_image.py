"""An arm64 image made here for real, under emulation (Grace Hopper's architecture), as one of
a pair: one recipe, an image for amd64 and one for arm64.

testbed/qemu.sh registers Debian's qemu-user-static with binfmt_misc (fix-binary, so arm64
programs run in containers and on the cluster's nodes too). A small recipe with `arch: [amd64,
arm64]` (Python and a NumPy wheel, no framework) is locked for each (uv: x86_64 and aarch64),
its arm64 Debian base bootstrapped (debootstrap's second stage under qemu, loaded with its
architecture); one build makes both images (arm64's by the Docker engine for linux/arm64,
verified by running its checks under emulation) and pushes them under one OCI image index,
which the engine itself then reads back for each platform; convert writes a SIF each, the
arm64 one's descriptor says arm64; and `run --recipe` takes the image of the partition's
architecture on both nodes of the local cluster: arm64 through a profile that says its nodes
are arm64, amd64 through the local profile."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import requests

from tests._json_records import check, records
from tests.e2e.sif_fixtures import ROOT, run_testbed, sif_tools  # noqa: F401
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    job_dir,
    slurm_cluster,
)

# under emulation: about 9 minutes of a cold .ci/run's 2 cores, so `make test-arm64` (-m arm64)
pytestmark = [pytest.mark.e2e, pytest.mark.arm64]

NAME = "hvd-test-arm64-mini"
RECIPE = f"""extends: cpu-bookworm
name: {NAME}
description: Python 3.11 and NumPy for amd64 and arm64, no framework (the pair end to end)
arch: [amd64, arm64]
mpi: null
pytorch: null
horovod: null
checks:
  - python -c 'import platform, numpy; print(platform.machine())'
"""
MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}


@pytest.fixture(scope="module")
def qemu() -> None:
    run_testbed("qemu.sh", "up")


@pytest.fixture(scope="module")
def pair_recipe(qemu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe, locked for x86_64 and for aarch64 by `hvd-container lock` (uv)."""
    recipe = tmp_path_factory.mktemp("pair") / f"{NAME}.yaml"
    recipe.write_text(RECIPE)
    locked = cli("lock", str(recipe), "--json", timeout=600)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    locks = [check("lock", r) for r in records(locked.stdout) if "path" in r]
    assert [lock["arch"] for lock in locks] == ["amd64", "arm64"]
    return recipe


def test_each_image_is_locked_for_its_own_machine(pair_recipe: Path) -> None:
    for arch, machine in MACHINE.items():
        lock = pair_recipe.with_suffix(f".{arch}.lock").read_text()
        assert f"python 3.11, {machine}-manylinux_2_36" in lock.splitlines()[1], lock[:300]
        assert "numpy==" in lock


@pytest.fixture(scope="module")
def pair_built(pair_recipe: Path, base_image: str, local_registry: str) -> list[dict]:
    # an earlier run's images would be up to date, built without a step to check: drop their
    # names (their layers stay, so the steps run again, cached)
    for arch in MACHINE:
        subprocess.run(["docker", "image", "rm", "--no-prune", f"{NAME}:1-{arch}"],
                       capture_output=True, check=False)  # fmt: skip
    proc = cli("build", str(pair_recipe), "--push", local_registry, "--progress", "json",
               timeout=3600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    return records(proc.stdout)


def test_the_arm64_image_is_built_from_an_arm64_base_and_verified_under_emulation(
    pair_built: list[dict],
) -> None:
    steps = [r["text"] for r in pair_built if r["event"] == "step"]
    assert any("FROM --platform=linux/arm64 hvd-base/debian:bookworm-arm64" in s for s in steps)
    results = {r["arch"]: r for r in pair_built if r["event"] == "result"}
    assert sorted(results) == ["amd64", "arm64"]
    for arch, result in results.items():
        assert result["tag"] == f"{NAME}:1-{arch}"
        assert result["labels"]["org.hvd-container.verified"] == "true"
        assert result["labels"]["org.hvd-container.arch"] == arch
    verify = cli("verify", f"{NAME}:1-arm64", "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    checked = json.loads(verify.stdout.strip().splitlines()[-1])
    assert checked["ok"] and checked["facts"]["org.hvd-container.arch"] == "arm64", checked


def test_the_index_in_the_registry_gives_each_platform_its_image(
    pair_built: list[dict], local_registry: str
) -> None:
    results = {r["arch"]: r for r in pair_built if r["event"] == "result"}
    index = results["arm64"]["index"]
    assert index["remote"] == f"{local_registry}/{NAME}:1"
    served = requests.get(
        f"http://{local_registry}/v2/{NAME}/manifests/1",
        headers={"Accept": "application/vnd.oci.image.index.v1+json"},
        timeout=30,
    )
    assert served.headers["Content-Type"] == "application/vnd.oci.image.index.v1+json"
    platforms = {m["platform"]["architecture"]: m["digest"] for m in served.json()["manifests"]}
    assert platforms == {arch: results[arch]["pushed"]["digest"] for arch in MACHINE}
    # the engine reads the index as any runtime would: each platform pulls its own image
    remote = index["remote"]
    try:
        for arch in MACHINE:
            pulled = subprocess.run(["docker", "pull", "-q", "--platform", f"linux/{arch}", remote],
                                    capture_output=True, text=True, check=False)  # fmt: skip
            assert pulled.returncode == 0, pulled.stderr
            seen = subprocess.run(
                ["docker", "image", "inspect", "-f",
                 '{{.Architecture}} {{index .Config.Labels "org.hvd-container.recipe.version"}}',
                 remote], capture_output=True, text=True, check=True,
            ).stdout.split()  # fmt: skip
            assert seen == [arch, f"1-{arch}"]
    finally:
        subprocess.run(["docker", "image", "rm", remote], capture_output=True, check=False)


@pytest.fixture(scope="module")
def pair_sifs(
    pair_built: list[dict],
    pair_recipe: Path,
    tmp_path_factory: pytest.TempPathFactory,
    sif_tools: None,  # noqa: F811 - tar2sqfs: this module runs first on a fresh machine
) -> Path:
    """A SIF an architecture, in the folder the runs start in: where the local profiles'
    images.template ({name}_{version}.sif) finds them."""
    folder = tmp_path_factory.mktemp("pair-sifs")
    proc = cli("convert", str(pair_recipe), "--to", "sif", "-o", str(folder), "--json",
               timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    made = json.loads(proc.stdout.strip().splitlines()[-1])["images"]
    assert [(Path(m["path"]).name, m["arch"]) for m in made] == [
        (f"{NAME}_1-{arch}.sif", arch) for arch in MACHINE
    ]
    return folder


def test_the_arm64_sif_says_arm64(pair_sifs: Path) -> None:
    inspected = cli("inspect", str(pair_sifs / f"{NAME}_1-arm64.sif"))
    assert inspected.returncode == 0, inspected.stderr
    assert "arch:   arm64" in inspected.stdout.splitlines(), inspected.stdout


@pytest.mark.parametrize("arch", ["arm64", "amd64"])
def test_run_recipe_takes_the_image_of_the_partitions_architecture_on_both_nodes(
    arch: str,
    pair_sifs: Path,
    pair_recipe: Path,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
) -> None:
    # the same nodes: said to be arm64 (Grace's architecture, emulated by qemu there), or as
    # they are
    site = str(arm64_profile(pair_sifs)) if arch == "arm64" else "local"
    probe = "import platform, socket, numpy; print(socket.gethostname(), platform.machine())"
    result = cli(
        "run", "--site", site, "--recipe", str(pair_recipe), "-N", "2",
        "--ntasks-per-node", "1", "python", "-c", probe, cwd=pair_sifs, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"its {arch} image, {NAME}:1-{arch}, for the {arch} nodes" in result.stderr
    machine = MACHINE[arch]
    assert sorted(result.stdout.split()) == sorted([machine, machine, "node1", "node2"]), (
        result.stdout
    )


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
