"""podman-hpc for real: Debian's podman and PyPI's podman-hpc (testbed/podman-hpc.sh) on this
machine. `convert --to podman-hpc` pushes the CPU image to the local registry and runs the
real `podman-hpc pull`, which migrates it into the squashed store (a static mksquashfs run
inside the image); `run --runtime podman-hpc` then trains across the local cluster's two nodes
from that store, one `podman-hpc run` per rank under srun: over MPI (srun --mpi=pmix; the
local profile binds Slurm's TmpFS, where each node's PMIx server keeps its files, and the
launcher passes the PMIX_* variables) and over Horovod's Gloo controller.

`build --engine podman-hpc` is Perlmutter's own path, `podman-hpc build` then `podman-hpc
migrate`: a recipe extending cpu-bookworm-torch is built in podman-hpc's store through its API
service, verified, migrated into the squashed store by the build itself, and trains DDP on the
two nodes from there. As root here (the local cluster's jobs run as root, and podman-hpc's
stores are per user); building without root is tests/e2e/test_podman_rootless.py's."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from build_fixtures import CPU_RECIPE, TORCH_RECIPE

from tests._json_records import records
from tests.e2e.podman_hpc_fixtures import cpu_migrated, forget, podman_hpc_cmd  # noqa: F401
from tests.e2e.sif_fixtures import ROOT, run_testbed
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    job_dir,
    slurm_cluster,
)
from tests.e2e.test_run_torch import EXAMPLES, check_torch_training
from tests.e2e.test_run_training import _check_training, _train

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def podman_hpc() -> None:
    run_testbed("podman-hpc.sh", "up")


@pytest.fixture(scope="module")
def migrated(cpu_migrated: str, podman_hpc: None) -> str:  # noqa: F811
    return cpu_migrated


def test_convert_migrates_the_image_into_the_squashed_store(migrated: str) -> None:
    listing = podman_hpc_cmd("images", "--format", "{{.Repository}}:{{.Tag}} {{.ReadOnly}}")
    assert listing.returncode == 0, listing.stderr
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


BUILT = "hvd-test-podman-hpc"


@pytest.fixture(scope="module")
def podman_hpc_built(
    podman_hpc: None, base_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[dict]]:
    """`build --engine podman-hpc` of a recipe extending cpu-bookworm-torch: its JSON records."""
    run_testbed("podman-hpc.sh", "load-base", "bookworm")
    recipe = tmp_path_factory.mktemp("podman-hpc-build") / f"{BUILT}.yaml"
    recipe.write_text(
        f"extends: {TORCH_RECIPE}\nname: {BUILT}\n"
        "checks:\n  - python -c 'import torch.distributed as d; assert d.is_available()'\n"
    )
    shutil.copy(ROOT / "recipes" / f"{TORCH_RECIPE}.lock", recipe.with_suffix(".lock"))
    # an earlier session's image would be up to date, built without a step: drop its names
    # (its layers stay in podman-hpc's store, so the steps run again, cached)
    # (`untag IMAGE` with no names drops all of them; the build names it localhost/ and docker.io/)
    for name in (f"localhost/{BUILT}:1", f"docker.io/library/{BUILT}:1"):
        podman_hpc_cmd("untag", name)
    try:
        proc = cli(
            "build", str(recipe), "--engine", "podman-hpc", "--progress", "json", timeout=1800
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        yield records(proc.stdout)
    finally:
        forget(f"localhost/{BUILT}:1", f"docker.io/library/{BUILT}:1")


# heavy (make test-heavy): a cold build in podman-hpc's own store, 4-5 minutes; .ci/run keeps
# `convert --to podman-hpc` and training under podman-hpc, and rootless podman's build
@pytest.mark.heavy
def test_a_podman_hpc_build_is_verified_and_migrated(podman_hpc_built: list[dict]) -> None:
    steps = [r for r in podman_hpc_built if r["event"] == "step"]
    assert {r["phase"] for r in steps} >= {"base", "frameworks", "checks"}
    (result,) = [r for r in podman_hpc_built if r["event"] == "result"]
    assert result["tag"] == f"{BUILT}:1"
    assert result["labels"]["org.hvd-container.verified"] == "true"
    said = [r["text"] for r in podman_hpc_built if "squashed store" in r.get("text", "")]
    assert said == [
        f"{BUILT}:1 is in podman-hpc's squashed store as localhost/{BUILT}:1, where "
        "`podman-hpc run` finds it"
    ]
    listing = podman_hpc_cmd(
        "images", "--format", "{{.Repository}}:{{.Tag}} {{.ReadOnly}} {{.ID}}"
    ).stdout.splitlines()
    short = result["image_id"].removeprefix("sha256:")[:12]
    assert f"localhost/{BUILT}:1 true {short}" in listing, listing
    # the private API service stopped with the command
    assert subprocess.run(["pgrep", "-f", "service --time=0 unix://.*/hvd-podman-"]).returncode == 1


# heavy (make test-heavy): a cold build in podman-hpc's own store, 4-5 minutes; .ci/run keeps
# `convert --to podman-hpc` and training under podman-hpc, and rootless podman's build
@pytest.mark.heavy
def test_the_podman_hpc_build_trains_ddp_on_two_nodes_from_the_squashed_store(
    podman_hpc_built: list[dict],
    slurm_cluster: str,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    checkpoint = job_dir / "podman-hpc-built" / "model.pt"
    result = cli(
        "run", "--site", "local", "--runtime", "podman-hpc", "--image", f"{BUILT}:1",
        "--controller", "torch", "-N", "2", "--ntasks-per-node", "1",
        str(ROOT / "examples" / EXAMPLES["ddp"]), "--epochs", "3",
        "--checkpoint", str(checkpoint), cwd=job_dir, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    check_torch_training(result.stdout, "DDP", checkpoint, epochs=3)


DERIVED = "hvd-test-podman-hpc-rich"


# heavy (make test-heavy): cpu-bookworm built in podman-hpc's own store compiles Horovod there,
# about 8 minutes on 2 cores; the same reuse through dockerd is in .ci/run (test_horovod_stage)
@pytest.mark.heavy
def test_a_derived_recipe_built_by_podman_hpc_reuses_its_compiled_horovod(
    podman_hpc: None, base_image: str, tmp_path: Path
) -> None:
    """Horovod compiled once in podman-hpc's store: the recipe that extends cpu-bookworm with
    one more package takes the wheel stage's compile from buildah's cache (`(cached)` on its
    step), as dockerd does, and is verified."""
    from test_horovod_stage import derived_recipe, steps

    run_testbed("podman-hpc.sh", "load-base", "bookworm")
    names = [f"{prefix}/{name}:1" for name in (CPU_RECIPE, DERIVED)
             for prefix in ("localhost", "docker.io/library")]  # fmt: skip
    try:
        parent = cli("build", CPU_RECIPE, "--engine", "podman-hpc", "--progress", "plain",
                     timeout=3600)  # fmt: skip
        assert parent.returncode == 0, parent.stdout[-3000:] + parent.stderr
        recipe, _said = derived_recipe(tmp_path, DERIVED)
        built = cli("build", str(recipe), "--engine", "podman-hpc", "--progress", "plain",
                    timeout=1800)  # fmt: skip
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr
        found = steps(built.stdout)
        compile_step = [s for s in found if "hvd-pip wheel" in s[0]]
        assert compile_step and all(cached for _, cached in compile_step), found
        label = podman_hpc_cmd("image", "inspect", "--format",
                               '{{ index .Labels "org.hvd-container.verified" }}',
                               f"localhost/{DERIVED}:1")  # fmt: skip
        assert label.stdout.strip() == "true", label.stdout + label.stderr
    finally:
        forget(*names)
