"""MPI that a site's Cray MPICH can replace: PyPI's `mpich` wheel (soname libmpi.so.12, the
MPICH ABI) in the CPU recipe instead of Debian's Open MPI, built for real, Horovod linked to
it, and trained on two nodes under `srun --mpi=pmi2`, the plugin Perlmutter launches with."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from build_fixtures import hvd

from tests.e2e.sif_fixtures import ROOT
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    job_dir,
    sif_of,
    slurm_cluster,
)
from tests.e2e.test_build_cpu import run_in
from tests.e2e.test_run_training import _check_training, _train

# heavy (make test-heavy): Horovod compiled against the MPICH wheel (5 minutes) and its two-node
# training (2 more)
pytestmark = [pytest.mark.e2e, pytest.mark.heavy]

RECIPE = """\
extends: {base}
name: cpu-mpich-wheel
description: the CPU recipe with PyPI's MPICH (libmpi.so.12) for srun --mpi=pmi2
mpi:
  flavor: mpich
  version: "5.0.2"
  source: pip
  pmi: [pmi2]
"""
LINKS = """\
import glob, subprocess
lib = glob.glob("/opt/venv/lib/python3.11/site-packages/horovod/torch/mpi_lib_v2*.so")[0]
print(subprocess.run(["ldd", lib], capture_output=True, text=True).stdout)
"""


@pytest.fixture(scope="module")
def mpich_image(tmp_path_factory: pytest.TempPathFactory, base_image: str) -> str:
    folder = tmp_path_factory.mktemp("mpich-wheel")
    recipe = folder / "cpu-mpich-wheel.yaml"
    recipe.write_text(RECIPE.format(base=ROOT / "recipes" / "cpu-bookworm.yaml"))
    # the CPU lock's versions as constraints keep the build the CPU image's, plus mpich
    shutil.copy(ROOT / "recipes" / "cpu-bookworm.lock", folder / "cpu-mpich-wheel.lock")
    # locked by its name in its folder: the lock's header names the command that refreshes it,
    # and a path that changes from run to run would change the lock the image copies (and
    # rebuild Horovod every run)
    locked = hvd("lock", recipe.name, "--json", cwd=folder)
    assert locked.returncode == 0, locked.stderr
    assert "mpich" in json.loads(locked.stdout.splitlines()[-1])["packages"]
    proc = hvd("build", str(recipe), "--progress", "plain")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return "cpu-mpich-wheel:1"


def test_horovod_links_the_mpich_abi_library(api: Any, mpich_image: str) -> None:
    labels = api.inspect_image(mpich_image)["Config"]["Labels"]
    assert labels["org.hvd-container.mpi.family"] == "mpich"
    assert labels["org.hvd-container.mpi.pmi"] == "pmi2"
    assert labels["org.hvd-container.versions.mpi"] == "5.0.2"
    code, out = run_in(api, mpich_image, ["python", "-c", LINKS])
    assert code == 0, out
    found = re.search(r"libmpi\.so\.12 => (\S+)", out)
    assert found and found.group(1) == "/opt/venv/lib/libmpi.so.12", out
    assert "libmpi.so.40" not in out and "libmpich.so" not in out


def test_two_node_training_under_srun_pmi2(
    mpich_image: str,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    sif = sif_of(mpich_image)
    checkpoint = job_dir / "mpich" / "model.pt"
    result = _train(checkpoint=checkpoint, image=sif, cwd=job_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    # the image speaks PMI-2: the launcher chose --mpi=pmi2 over the local site's pmix
    assert "using --mpi=pmi2" in result.stderr, result.stderr
    _check_training(result.stdout, "mpi", checkpoint)


def test_doctor_says_cray_mpich_can_replace_it(mpich_image: str) -> None:
    result = cli(
        "doctor", "--site", "perlmutter", "--image", mpich_image, "-N", "2", "--account", "m1_g"
    )
    lines = result.stdout.splitlines()
    assert any(line.startswith("PASS  mpi-abi ") for line in lines), lines
    assert any(line.startswith("PASS  mpi-plugin ") for line in lines), lines
