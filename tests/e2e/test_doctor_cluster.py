"""`hvd-container doctor` on the local cluster: the static checks and the smoke job across its
two nodes, then planted faults each caught with the right fix: a wrong --mpi plugin, a ppc64le
SIF made by siftool (no labels of ours), and an image whose Horovod lacks the MPI controller
(built for real from a variant of the CPU recipe)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from build_fixtures import hvd

from tests.e2e.sif_fixtures import ROOT
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    cpu_sif,
    job_dir,
    sif_of,
    slurm_cluster,
)

pytestmark = pytest.mark.e2e

TWO_NODES = ["--site", "local", "-N", "2", "--ntasks-per-node", "1"]


@pytest.fixture()
def cluster(slurm_cluster: str, charliecloud_runtime: None) -> None:  # noqa: F811
    return None


def checks(stdout: str) -> dict[str, list[dict[str, str]]]:
    """The registry's checks and what the smoke job found, by name."""
    record = json.loads(stdout.splitlines()[-1])
    out: dict[str, list[dict[str, str]]] = {}
    for row in [*record["checks"], *record["smoke"]]:
        out.setdefault(row["check"], []).append(row)
    return out


def test_doctor_smoke_across_two_nodes(cluster: None, cpu_sif: Path, job_dir: Path) -> None:  # noqa: F811
    started = time.monotonic()
    result = cli("doctor", *TWO_NODES, "--image", str(cpu_sif), "--smoke", "--json", cwd=job_dir)
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    found = checks(result.stdout)
    assert all(r["status"] != "fail" for rows in found.values() for r in rows), found
    assert found["srun-mpi"][0]["message"] == "srun offers --mpi=pmix"
    for controller in ("mpi", "gloo"):
        (line,) = found[f"smoke-{controller}"]
        assert line["message"] == f"2 ranks, size 2, over {controller}, on node1, node2", line
        (allreduce,) = found[f"allreduce-{controller}"]
        assert allreduce["status"] == "pass", allreduce
        assert "node1" in allreduce["message"] and "node2" in allreduce["message"]
    assert not list((job_dir / ".hvd-container").glob("doctor-smoke-*.py"))  # cleaned up
    assert seconds < 60, f"doctor --smoke took {seconds:.0f} s"


def test_wrong_mpi_plugin_is_caught_before_any_job(
    cluster: None,
    cpu_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    result = cli(
        "doctor", *TWO_NODES, "--image", str(cpu_sif), "--mpi", "pmi2", "--smoke", cwd=job_dir
    )
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(
        line.startswith("FAIL  mpi-plugin")
        and "srun --mpi=pmi2 does not match the image's MPI" in line
        and "pass --mpi pmix" in line
        for line in lines
    ), lines
    assert "FAIL  smoke              not run: fix the failing checks first" in lines


def test_ppc64le_sif_made_by_siftool_is_refused(cluster: None, tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "true").write_text("")
    squash = tmp_path / "root.sqfs"
    subprocess.run(["mksquashfs", str(root), str(squash), "-quiet", "-noappend"], check=True)
    sif = tmp_path / "p9.sif"
    subprocess.run(["siftool", "new", str(sif)], check=True)
    subprocess.run(
        ["siftool", "add", str(sif), str(squash), "--datatype", "4", "--parttype", "2",
         "--partfs", "1", "--partarch", "6"],
        check=True,
    )  # fmt: skip
    result = cli("doctor", *TWO_NODES, "--image", str(sif), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"FAIL  arch               image {sif} is built for ppc64le but site local runs" in (
        result.stdout
    )
    # the same check stops a launch, dry runs included
    dry = cli("run", *TWO_NODES, "--image", str(sif), "--dry-run", "train.py", cwd=tmp_path)
    assert dry.returncode == 2 and "is built for ppc64le" in dry.stderr


@pytest.fixture(scope="module")
def gloo_only_sif(tmp_path_factory: pytest.TempPathFactory, base_image: str) -> Path:
    """The CPU recipe with Horovod built without its MPI controller (the lock is the CPU
    recipe's: the same packages), built and converted for real."""
    folder = tmp_path_factory.mktemp("gloo-only")
    recipe = folder / "cpu-gloo-only.yaml"
    recipe.write_text(
        f"extends: {ROOT / 'recipes' / 'cpu-bookworm.yaml'}\nname: cpu-gloo-only\n"
        "horovod:\n  controllers: [gloo]\n"
    )
    shutil.copy(ROOT / "recipes" / "cpu-bookworm.lock", folder / "cpu-gloo-only.lock")
    proc = hvd("build", str(recipe), "--progress", "plain")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return sif_of("cpu-gloo-only:1")


# heavy (make test-heavy): Horovod compiled again without its MPI controller, 5-6 minutes
@pytest.mark.heavy
def test_image_without_the_mpi_controller(
    cluster: None,
    gloo_only_sif: Path,
    job_dir: Path,  # noqa: F811
) -> None:
    result = cli("doctor", *TWO_NODES, "--image", str(gloo_only_sif), "--smoke", cwd=job_dir)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "builds Horovod without the MPI controller: pass --controller gloo" in result.stdout
    # with the fix, the smoke job runs over Gloo on both nodes
    fixed = cli(
        "doctor", *TWO_NODES, "--image", str(gloo_only_sif), "--controller", "gloo", "--smoke",
        cwd=job_dir,
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "PASS  smoke-gloo         2 ranks, size 2, over gloo, on node1, node2" in fixed.stdout
