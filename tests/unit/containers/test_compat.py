"""Each field-known incompatibility is refused with file:line, key path and the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _recipe_helpers import CPU_RECIPE, GPU_RECIPE, WHEELS_RECIPE, line_of, merged, write
from hvd_container.containers import compat
from hvd_container.containers.recipe import Recipe
from hvd_container.containers.recipe_loader import load_recipe, read_recipe

from hvd_container.core.errors import UserError

TORCH_113 = {"version": "1.13.1", "torchvision": "0.14.1", "cuda_tag": "cu117"}

# (rule, recipe, key path of the error, message after "key.path: "); the line is that of the
# longest prefix of the key path the file spells out.
CASES: list[tuple[str, dict[str, Any], tuple[str, ...], str]] = [
    (
        "pypi_torch_cuda_build",
        merged(GPU_RECIPE, pytorch=dict(TORCH_113, cuda_tag="cu116", wheel_index="pypi")),
        ("pytorch", "cuda_tag"),
        "PyPI's torch 1.13.1 is the cu117 build, not cu116: set cuda_tag: cu117, or take cu116 "
        "wheels from the PyTorch index (wheel_index: download.pytorch.org)",
    ),
    (
        "gpu_build_names_its_gpus",
        merged(GPU_RECIPE, horovod={**GPU_RECIPE["horovod"], "cuda_cc": []}),
        ("horovod", "gpu_operations"),
        "an NCCL build needs horovod.cuda_cc, the compute capabilities of the site's GPUs "
        "(e.g. [80] for A100, [70, 80] for V100 and A100, [90] for H100/GH200)",
    ),
    (
        "horovod_cxx_patch",
        merged(CPU_RECIPE, horovod={"version": "0.28.1", "frameworks": ["pytorch"]}),
        ("horovod", "patches"),
        "horovod 0.28.1 does not compile against torch 2.13.0 (its CMake files set C++14, "
        "torch >= 2.1 headers need C++17): add `cxx17` to horovod.patches",
    ),
    (
        "horovod_cxx_patch (C++20)",
        merged(CPU_RECIPE, pytorch={"version": "2.14.1", "cuda_tag": "cpu"}),
        ("horovod", "patches"),
        "horovod 0.28.1 does not compile against torch 2.14.1 (its CMake files set C++14, "
        "torch >= 2.14 headers need C++20): add `cxx20` to horovod.patches",
    ),
    (
        "cuda_wheels_have_nvcc",
        merged(WHEELS_RECIPE, cuda={"version": "12.6", "source": "pip"}),
        ("cuda", "version"),
        "NVIDIA's CUDA 12.6 wheels have no nvcc, which Horovod's GPU build needs: use cuda "
        "13.0 or newer with source: pip, or a CUDA base image",
    ),
    (
        "cuda_wheels_have_nvcc (venv)",
        merged(WHEELS_RECIPE, python={"version": "3.11", "source": "image"}),
        ("cuda", "source"),
        "cuda.source: pip installs into the recipe's venv: it needs python.source: system",
    ),
    (
        "mpi_wheel_needs_venv",
        merged(
            CPU_RECIPE,
            python={"version": "3.11", "source": "image"},
            mpi={"flavor": "mpich", "source": "pip", "pmi": ["pmi2"]},
        ),
        ("mpi", "source"),
        "mpi.source: pip installs into the recipe's venv: it needs python.source: system",
    ),
    (
        "nccl_source_matches_cuda",
        merged(WHEELS_RECIPE, nccl={"version": "2.30.7"}),
        ("nccl", "source"),
        "nccl from apt needs NVIDIA's apt repository of a CUDA base image: with cuda.source: "
        "pip set nccl.source: pip",
    ),
    (
        "tensorflow_python_wheels",
        merged(GPU_RECIPE, tensorflow={"version": "2.10.1"}, python={"version": "3.11"}),
        ("tensorflow", "version"),
        "tensorflow 2.10.1 has no wheels for Python 3.11 (only 3.7 to 3.10): change "
        "python.version or tensorflow.version",
    ),
    (
        "tensorflow_cuda_major",
        merged(GPU_RECIPE, tensorflow={"version": "2.15.1"}),
        ("tensorflow", "version"),
        "tensorflow 2.15.1 wheels are built for CUDA 12, the image has CUDA 11.8",
    ),
    (
        "tensorflow_gpu_package_retired",
        merged(GPU_RECIPE, tensorflow={"version": "2.12.0", "package": "tensorflow-gpu"}),
        ("tensorflow", "package"),
        "tensorflow-gpu has no release 2.12.0 (it ended with 2.11; `tensorflow` includes GPU "
        "support): use package: tensorflow",
    ),
    (
        "pytorch_python_wheels",
        merged(
            CPU_RECIPE,
            pytorch={"version": "1.12.1", "cuda_tag": "cpu"},
            horovod={"version": "0.28.1", "frameworks": ["pytorch"]},
        ),
        ("pytorch", "version"),
        "torch 1.12.1 has no wheels for Python 3.11 (only 3.7 to 3.10): change python.version "
        "or pytorch.version",
    ),
    (
        "pytorch_cuda_tag_published",
        merged(GPU_RECIPE, pytorch=dict(TORCH_113, cuda_tag="cu113")),
        ("pytorch", "cuda_tag"),
        "torch 1.13.1 was not published for cu113 (allowed: cpu, cu116, cu117)",
    ),
    (
        "pytorch_companions_match",
        merged(GPU_RECIPE, pytorch=dict(TORCH_113, torchvision="0.13.1")),
        ("pytorch", "torchvision"),
        "torchvision 0.13.1 does not match torch 1.13.1 (needs torchvision 0.14.x)",
    ),
    (
        "no_wheels_on_ppc64le",
        merged(CPU_RECIPE, arch="ppc64le"),
        ("pytorch", "source"),
        "pytorch has no pip wheels for ppc64le: use a base image that ships it and set "
        "pytorch.source: image",
    ),
    (
        "cuda_comes_from_base_image",
        merged(GPU_RECIPE, base={"image": "debootstrap:bookworm"}, python={"version": "3.11"}),
        ("cuda", "source"),
        "CUDA comes from the base image, a debootstrap base has none: set cuda.source: pip "
        "(NVIDIA's cuda-toolkit wheels), or use an nvidia/cuda:<version>-cudnn8-devel-<os> or "
        "NGC base image",
    ),
    (
        "cuda_comes_from_base_image (version)",
        merged(GPU_RECIPE, cuda={"version": "11.7"}),
        ("cuda", "version"),
        "cuda 11.7 does not match the base image nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04 "
        "(CUDA 11.8.0)",
    ),
    (
        "gpu_build_needs_devel_image",
        merged(GPU_RECIPE, base={"image": "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04"}),
        ("base", "image"),
        "horovod with GPU operations compiles CUDA code: "
        "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04 is not a -devel- image",
    ),
    (
        "gpu_parts_need_cuda (nccl)",
        merged(CPU_RECIPE, nccl={"version": "2.15.5"}),
        ("nccl",),
        "NCCL needs CUDA: add a cuda section (and a CUDA base image)",
    ),
    (
        "gpu_parts_need_cuda (gpu_operations)",
        merged(CPU_RECIPE, horovod=dict(CPU_RECIPE["horovod"], gpu_operations="nccl")),
        ("horovod", "gpu_operations"),
        "GPU operations need CUDA: add a cuda section or remove horovod.gpu_operations",
    ),
    (
        "gpu_parts_need_cuda (cuda_tag)",
        merged(CPU_RECIPE, pytorch={"version": "2.13.0", "cuda_tag": "cu121"}),
        ("pytorch", "cuda_tag"),
        "cuda_tag cu121 on an image without CUDA: use cuda_tag: cpu or add a cuda section",
    ),
    (
        "cuda_tag_matches_cuda",
        merged(
            GPU_RECIPE,
            base={"image": "nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04"},
            cuda={"version": "12.1"},
            nccl=None,
            tensorflow=None,
            horovod={"version": "0.28.1", "frameworks": ["pytorch"], "gpu_operations": "nccl"},
        ),
        ("pytorch", "cuda_tag"),
        "cu117 wheels bundle CUDA 11.7 but the image has CUDA 12.1: use a cu12x tag",
    ),
    (
        "cuda_tag_matches_cuda (cpu torch, NCCL)",
        merged(GPU_RECIPE, pytorch={"version": "1.13.1", "cuda_tag": "cpu"}),
        ("pytorch", "cuda_tag"),
        "horovod GPU operations need a CUDA build of torch: set pytorch.cuda_tag to a cu11x tag",
    ),
    (
        "lightning_needs_torch (missing)",
        merged(CPU_RECIPE, lightning={"version": "2.0.2"}, pytorch=None, horovod=None),
        ("lightning",),
        "lightning needs a pytorch section",
    ),
    (
        "lightning_needs_torch (too old)",
        merged(
            GPU_RECIPE,
            lightning={"version": "2.4.0"},
            pytorch={"version": "1.13.1", "cuda_tag": "cu117"},
        ),
        ("lightning", "version"),
        "lightning 2.4.0 needs torch >= 2.1, the recipe has 1.13.1",
    ),
    (
        "horovod_frameworks_present",
        merged(GPU_RECIPE, tensorflow=None),
        ("horovod", "frameworks"),
        "horovod framework tensorflow needs a tensorflow section in the recipe",
    ),
    (
        "horovod_frameworks_present (keras)",
        merged(
            GPU_RECIPE,
            tensorflow=None,
            horovod=dict(GPU_RECIPE["horovod"], frameworks=["keras", "pytorch"]),
        ),
        ("horovod", "frameworks"),
        "horovod framework keras needs a tensorflow section in the recipe "
        "(Horovod's keras support is tf.keras)",
    ),
    (
        "horovod_mpi_needs_mpi",
        merged(CPU_RECIPE, mpi=None),
        ("horovod", "controllers"),
        "the mpi controller needs an mpi section",
    ),
    (
        "horovod_mpi_needs_mpi (gpu_operations)",
        merged(
            GPU_RECIPE,
            mpi=None,
            horovod=dict(GPU_RECIPE["horovod"], controllers=["gloo"], gpu_operations="mpi"),
        ),
        ("horovod", "gpu_operations"),
        "gpu_operations: mpi needs an mpi section",
    ),
    (
        "nccl_link_needs_nccl_operations",
        merged(GPU_RECIPE, horovod=dict(GPU_RECIPE["horovod"], gpu_operations="mpi")),
        ("horovod", "nccl_link"),
        "nccl_link only applies with horovod.gpu_operations: nccl",
    ),
    (
        "distribution_mpi_pmi",
        merged(CPU_RECIPE, mpi={"flavor": "openmpi", "pmi": ["pmix", "pmi2"]}),
        ("mpi", "pmi"),
        "pmi2: the distribution's Open MPI is built with PMIx only: under srun --mpi=pmi2 every "
        'rank aborts in MPI_Init ("OMPI was not built with SLURM\'s PMI support"): use pmi: '
        "[pmix] (srun --mpi=pmix), or flavor: mpich for srun --mpi=pmi2",
    ),
    (
        "distribution_mpi_pmi (mpich)",
        merged(CPU_RECIPE, mpi={"flavor": "mpich", "pmi": ["pmix"]}),
        ("mpi", "pmi"),
        "pmix: the distribution's MPICH has no PMIx client (its PMI-1 client is served by srun "
        "--mpi=pmi2): use pmi: [pmi2], or flavor: openmpi for srun --mpi=pmix",
    ),
    (
        "system_python_of_distribution",
        merged(GPU_RECIPE, python={"version": "3.12"}, tensorflow=None),
        ("python", "version"),
        "ubuntu:22.04 has no python3.12 package (allowed: 3.10, 3.11): change python.version "
        "or the base image",
    ),
    (
        "system_python_of_distribution (debootstrap)",
        merged(CPU_RECIPE, python={"version": "3.10"}),
        ("python", "version"),
        "debian:bookworm has no python3.10 package (allowed: 3.11): change python.version or "
        "the base image",
    ),
]


def line_of_prefix(path: Path, key: tuple[str, ...]) -> int:
    for end in range(len(key), 0, -1):
        try:
            return line_of(path, *key[:end])
        except AssertionError:
            continue
    raise AssertionError(f"no prefix of {key} in {path}")


@pytest.mark.parametrize("rule, data, key, message", CASES, ids=[c[0] for c in CASES])
def test_rule_refuses_with_reason(
    tmp_path: Path, rule: str, data: dict[str, Any], key: tuple[str, ...], message: str
) -> None:
    path = write(tmp_path, data)
    with pytest.raises(UserError) as info:
        load_recipe(path)
    # every failing rule is reported: the case's own line is among them
    assert f"{path}:{line_of_prefix(path, key)}: {'.'.join(key)}: {message}" in info.value.problems
    # The rule named in the case is one that fires on this recipe.
    assert getattr(compat, rule.split(" ")[0])(Recipe.model_validate(data)) is not None


def test_every_rule_has_a_case() -> None:
    covered = {case[0].split(" ")[0] for case in CASES}
    assert covered == {rule.__name__ for rule in compat.RULES}


def test_fixed_recipes_pass(tmp_path: Path) -> None:
    for data in (CPU_RECIPE, GPU_RECIPE, WHEELS_RECIPE):
        # the rules judge the recipe itself: a lock is what a build of it needs besides
        assert compat.problems(read_recipe(write(tmp_path, data))) == []


def test_image_provided_frameworks_are_allowed_on_ppc64le(tmp_path: Path) -> None:
    data = merged(
        CPU_RECIPE,
        arch="ppc64le",
        base={"image": "example.org/powerai:1.7"},
        python={"version": "3.11", "source": "image"},
        pytorch={"version": "2.13.0", "source": "image"},
    )
    recipe = load_recipe(write(tmp_path, data))
    assert recipe.arch == "ppc64le"


def test_unknown_versions_are_not_judged(tmp_path: Path) -> None:
    data = merged(
        CPU_RECIPE,
        pytorch={"version": "9.0.0", "cuda_tag": "cpu"},
        horovod={"version": "0.28.1", "frameworks": ["pytorch"], "patches": ["cxx20"]},
    )
    assert load_recipe(write(tmp_path, data)).pytorch is not None
