"""The NCCL image (recipe gpu-bookworm), built, verified and run on this machine without a GPU.

CUDA 13's nvcc and NCCL come from NVIDIA's wheels and Horovod is compiled with NCCL for A100
and H100: the proof here is that it compiled and linked (`[X] NCCL` in check-build,
`nccl_built()`, libnccl in the extension's links), and that the same image trains on the CPU,
in Docker and from its SIF on two nodes of the local cluster. The cold build takes about
45 min on 2 cores, so these tests carry the `gpu` marker and run by `make test-gpu` only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.build_fixtures import GPU_RECIPE, grace_hopper_half
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    job_dir,
    sif_of,
    slurm_cluster,
)
from tests.e2e.test_build_cpu import ALLREDUCE, run_in
from tests.e2e.test_run_training import _check_training, _train

pytestmark = [pytest.mark.e2e, pytest.mark.gpu]

SITE = "/opt/venv/lib/python3.11/site-packages"

LINKS = f"""\
import glob, subprocess
import torch, horovod.torch as hvd
print("nccl_built", hvd.nccl_built(), "mpi_built", hvd.mpi_built(), "gloo_built", hvd.gloo_built())
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())
lib = glob.glob("{SITE}/horovod/torch/mpi_lib_v2*.so")[0]
print(subprocess.run(["ldd", lib], capture_output=True, text=True).stdout)
"""


def test_gpu_image_is_verified_with_nccl(api: Any, gpu_image: str) -> None:
    labels = api.inspect_image(gpu_image)["Config"]["Labels"]
    p = "org.hvd-container."
    assert labels[p + "verified"] == "true"
    assert labels[p + "horovod.tensor_ops"] == "gloo,mpi,nccl"  # check-build's [X] NCCL
    assert labels[p + "horovod.controllers"] == "gloo,mpi"
    assert labels[p + "versions.torch"] == "2.14.1"
    assert labels[p + "versions.cuda"].startswith("13.0")


def check_horovod_links_the_wheels_nccl(api: Any, image: str) -> None:
    code, out = run_in(api, image, ["python", "-c", LINKS])
    assert code == 0, out
    # nccl_built() is the NCCL version compiled against: 2.30.7, the wheel's
    assert "nccl_built 23007 mpi_built True gloo_built True" in out, out
    assert "torch 2.14.1" in out and "cuda 13.0" in out and "gpu False" in out, out
    nccl = re.search(r"libnccl\.so\.2 => (\S+)", out)
    assert nccl and nccl.group(1) == f"{SITE}/nvidia/nccl/lib/libnccl.so.2", out


def check_two_ranks_allreduce_over_mpi(api: Any, image: str, job: Path) -> None:
    (job / "allreduce.py").write_text(ALLREDUCE)
    launcher = ["mpirun", "--allow-run-as-root", "-np", "2", "--oversubscribe"]
    code, out = run_in(api, image, [*launcher, "python", "/job/allreduce.py"], job)
    assert code == 0, out
    assert sorted(re.findall(r"rank (\d of \d: sum \d+)$", out, re.M)) == [
        "0 of 2: sum 3",
        "1 of 2: sum 3",
    ], out


def test_horovod_is_compiled_and_linked_with_the_wheels_nccl(api: Any, gpu_image: str) -> None:
    check_horovod_links_the_wheels_nccl(api, gpu_image)
    code, out = run_in(api, gpu_image, ["nvcc", "--version"])
    assert code == 0 and "release 13.0" in out, out


def test_two_rank_allreduce_on_the_cpu(api: Any, gpu_image: str, tmp_path: Path) -> None:
    check_two_ranks_allreduce_over_mpi(api, gpu_image, tmp_path)


def test_two_node_training_from_the_gpu_sif(
    gpu_image: str,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    sif = sif_of(gpu_image)
    checkpoint = job_dir / "gpu" / "model.pt"
    result = _train(checkpoint=checkpoint, image=sif, cwd=job_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    _check_training(result.stdout, "mpi", checkpoint)


def test_the_grace_hopper_horovod_image_is_built_and_allreduces_under_emulation(
    api: Any, base_image: str, tmp_path: Path
) -> None:
    """The recipe's arm64 half (`--arch arm64`, gpu-bookworm.arm64.lock): Horovod compiled under
    qemu with the aarch64 wheels' nvcc and NCCL (sm_80, sm_90: GH200), verified there, and two
    ranks allreduce over MPI in it. About an hour under emulation here, 46 minutes of it
    Horovod's compile (bench/README)."""
    labels = grace_hopper_half(api, GPU_RECIPE, timeout=3 * 3600)
    p = "org.hvd-container."
    assert labels[p + "horovod.tensor_ops"] == "gloo,mpi,nccl"  # check-build's [X] NCCL
    assert labels[p + "versions.torch"] == "2.14.1"
    image = f"{GPU_RECIPE}:1-arm64"
    check_horovod_links_the_wheels_nccl(api, image)
    check_two_ranks_allreduce_over_mpi(api, image, tmp_path)
