"""gpu-bookworm-torch, built, verified and run on this machine without a GPU: torch 2.14.1
(CUDA 13.0) with the NCCL it loads and no Horovod. The proof here is that verify found NCCL and
gloo in torch.distributed (is_nccl_available(), is_gloo_available()) and ran no check-build,
and that the image's DDP example trains on two nodes of the local cluster from its SIF over
gloo. Its pip layer is about 5 GB, so these tests carry the `gpu` marker (`make test-gpu`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.build_fixtures import GPU_TORCH_RECIPE, grace_hopper_half
from tests.e2e.sif_fixtures import ROOT
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    job_dir,
    sif_of,
    slurm_cluster,
)
from tests.e2e.test_run_torch import check_torch_training

pytestmark = [pytest.mark.e2e, pytest.mark.gpu]


def test_gpu_torch_image_is_verified_with_nccl_and_without_horovod(
    api: Any, gpu_torch_image: str
) -> None:
    labels = api.inspect_image(gpu_torch_image)["Config"]["Labels"]
    p = "org.hvd-container."
    assert labels[p + "verified"] == "true"
    assert set(labels[p + "torch.distributed"].split(",")) >= {"gloo", "nccl"}
    assert labels[p + "versions.torch"].startswith("2.14.1")
    assert labels[p + "versions.cuda"].startswith("13.0")
    assert not any(k.startswith(p + "horovod.") for k in labels)  # no check-build to record
    # the unversioned libcudart.so loads (CSCS's Container Engine NCCL plugin needs it)
    assert labels[p + "cuda.libcudart_so"] == "true"


def test_gpu_torch_image_trains_ddp_on_two_nodes_from_its_sif(
    gpu_torch_image: str,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    checkpoint = job_dir / "gpu-torch" / "model.pt"
    result = cli(
        "run", "--site", "local", "--image", str(sif_of(gpu_torch_image)), "-N", "2",
        "--ntasks-per-node", "1", "--recipe", "gpu-bookworm-torch",
        str(ROOT / "examples" / "ddp_synthetic.py"), "--epochs", "3", "--no-cuda",
        "--checkpoint", str(checkpoint), cwd=job_dir, timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    check_torch_training(result.stdout, "DDP", checkpoint, epochs=3)


def test_the_grace_hopper_image_is_built_and_verified_under_emulation(
    api: Any, base_image: str
) -> None:
    """The recipe's arm64 half (`--arch arm64`, its own lock: PyPI's aarch64 torch 2.14.1, the
    same CUDA 13.0 build and NCCL): built from the arm64 base under qemu (10 or newer:
    bookworm's 7.2 crashed in `import torch`), verified there by the recipe's own checks."""
    labels = grace_hopper_half(api, GPU_TORCH_RECIPE, timeout=5400)
    p = "org.hvd-container."
    assert set(labels[p + "torch.distributed"].split(",")) >= {"gloo", "nccl"}
    assert labels[p + "versions.torch"].startswith("2.14.1")
    assert labels[p + "versions.cuda"].startswith("13.0")


def test_the_cuda_12_twin_is_verified_and_carries_volta_kernels(api: Any, base_image: str) -> None:
    """gpu-bookworm-torch-cu12: PyPI's torch 2.10.0 (CUDA 12.8), for V100 partitions and
    drivers below 580. Verified (NCCL and gloo in torch.distributed), and the kernels it was
    compiled for, read from the library in the image, start at sm_70."""
    from tests.e2e.conftest import built

    image = built("gpu-bookworm-torch-cu12")
    labels = api.inspect_image(image)["Config"]["Labels"]
    p = "org.hvd-container."
    assert labels[p + "verified"] == "true"
    assert labels[p + "versions.torch"].startswith("2.10.0")
    assert labels[p + "versions.cuda"].startswith("12.8")
    assert set(labels[p + "torch.distributed"].split(",")) >= {"gloo", "nccl"}
    # CUDA 12's runtime wheel brings libcudart.so.12 only: the recipe links libcudart.so
    assert labels[p + "cuda.libcudart_so"] == "true"
    # what verify read from torch in the image (torch._C._cuda_getArchFlags(): no GPU needed)
    assert labels[p + "torch.cuda_archs"].split(",") == [
        "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120",
    ]  # fmt: skip
    again = cli("verify", image)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nccl 2.27.5 is known-bad" in again.stdout  # torch 2.10.0 pins that NCCL
