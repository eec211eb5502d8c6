"""CUDA and NCCL from NVIDIA's wheels (cuda.source / nccl.source: pip), made usable as a toolkit.

The wheels come with the lock (containers/blocks/locked.py) into the venv's site-packages; this
block, after them, gives them the layout CMake and Horovod look for: the toolkit linked as
/usr/local/cuda, `lib64` (CMake's CUDA check looks there), the unversioned `libcudart.so` and
`libnccl.so` (FindCUDAToolkit, Horovod's FindNCCL) and an ld.so.conf entry for both lib dirs.
CUDA 12's wheels bring the runtime only: its `libcudart.so` link and lib dir are laid out too,
for what loads it by that name (a dynamically linked NCCL network plugin).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import VENV, block, env, run

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block, Instruction
    from hvd_container.containers.recipe import LockedRecipe, Recipe

CUDA_HOME = "/usr/local/cuda"
LD_CONF = "/etc/ld.so.conf.d/hvd-gpu-wheels.conf"


def site_packages(recipe: Recipe) -> str:
    return f"{VENV}/lib/python{recipe.python.version}/site-packages"


def cuda_major(recipe: Recipe) -> str:
    assert recipe.cuda is not None
    return recipe.cuda.version.split(".")[0]


def wheels_have_compiler(recipe: Recipe) -> bool:
    """CUDA 13's wheels carry nvcc; CUDA 12's ship ptxas only (compat.cuda_wheels_have_nvcc
    refuses a Horovod GPU build on them): with 12 the runtime is all there is to lay out, and
    torch finds it by itself (its libraries' RPATH names the nvidia/* packages)."""
    return int(cuda_major(recipe)) >= 13


def toolkit_dir(recipe: Recipe) -> str:
    """Where NVIDIA's cuda-toolkit wheels put nvcc, headers and libraries (CUDA 13: nvidia/cu13)."""
    return f"{site_packages(recipe)}/nvidia/cu{cuda_major(recipe)}"


def nccl_dir(recipe: Recipe) -> str:
    return f"{site_packages(recipe)}/nvidia/nccl"


def requirements(recipe: Recipe) -> list[str]:
    """The wheels to lock: the toolkit's compiler parts and NCCL, at the recipe's versions."""
    reqs = []
    cuda, nccl = recipe.cuda, recipe.nccl
    if cuda is not None and cuda.source == "pip":
        parts = cuda.version.split(".")
        pin = f"=={cuda.version}" if len(parts) > 2 else f"=={cuda.version}.*"
        extras = "cccl,cudart,nvcc" if wheels_have_compiler(recipe) else "cudart"
        reqs.append(f"cuda-toolkit[{extras}]{pin}")
    if cuda is not None and nccl is not None and nccl.source == "pip":
        reqs.append(f"nvidia-nccl-cu{cuda_major(recipe)}=={nccl.version}")
    return reqs


def cudart_dir(recipe: Recipe) -> str:
    """Where CUDA 12's runtime wheel (nvidia-cuda-runtime-cu12) puts libcudart.so.12."""
    return f"{site_packages(recipe)}/nvidia/cuda_runtime/lib"


def render(recipe: LockedRecipe) -> Block | None:
    cuda, nccl = recipe.cuda, recipe.nccl
    from_pip = cuda is not None and cuda.source == "pip"
    from_pip_cuda = from_pip and wheels_have_compiler(recipe)
    from_pip_nccl = cuda is not None and nccl is not None and nccl.source == "pip"
    if not (from_pip or from_pip_nccl):
        return None
    commands: list[str] = []
    lib_dirs: list[str] = []
    if from_pip and not from_pip_cuda:
        # the runtime alone (torch finds it by its RPATH); the unversioned link on the loader's
        # path is for what loads it by that name: a dynamically linked NCCL network plugin
        # (CSCS's Container Engine hooks fail at NCCL start without it)
        lib, major = cudart_dir(recipe), cuda_major(recipe)
        commands += [
            f"test -f {lib}/libcudart.so.{major} || {{ echo 'no libcudart.so.{major} in {lib}' >&2; exit 1; }}",
            f"ln -s libcudart.so.{major} {lib}/libcudart.so",
        ]
        lib_dirs.append(lib)
    if from_pip_cuda:
        cu = toolkit_dir(recipe)
        major = cuda_major(recipe)
        commands += [
            f"test -x {cu}/bin/nvcc || {{ echo 'no nvcc in {cu}' >&2; exit 1; }}",
            f"ln -s lib {cu}/lib64",
            f"ln -s libcudart.so.{major} {cu}/lib/libcudart.so",
            f"ln -s {cu} {CUDA_HOME}",
        ]
        lib_dirs.append(f"{cu}/lib")
    if from_pip_nccl:
        lib = f"{nccl_dir(recipe)}/lib"
        commands += [
            f"test -f {lib}/libnccl.so.2 || {{ echo 'no libnccl.so.2 in {lib}' >&2; exit 1; }}",
            f"ln -s libnccl.so.2 {lib}/libnccl.so",
        ]
        lib_dirs.append(lib)
    commands += [f"printf '%s\\n' {' '.join(lib_dirs)} > {LD_CONF}", "ldconfig"]
    items: list[Instruction] = [run(*commands)]
    if from_pip_cuda:
        items += [
            env("CUDA_HOME", CUDA_HOME, quote=False),
            env("PATH", f"{CUDA_HOME}/bin:$PATH", quote=False),
        ]
    return block("frameworks", *items)
