"""CUDA that comes with the base image (nvidia/cuda, NGC): this block checks it is the one asked
for. CUDA from NVIDIA's wheels is blocks/gpu_wheels.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import block, env, major_minor, run

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe

CUDA_HOME = "/usr/local/cuda"


def render(recipe: LockedRecipe) -> Block | None:
    if recipe.cuda is None or recipe.cuda.source != "image":  # pip: blocks/gpu_wheels.py
        return None
    toolkit = f"/usr/local/cuda-{major_minor(recipe.cuda.version)}"
    # Phase "mpi": the communication/GPU runtime libraries (CUDA, NCCL, MPI) come in one phase.
    return block(
        "mpi",
        env("CUDA_HOME", CUDA_HOME, quote=False),
        run(f"test -d {toolkit} || {{ echo 'base image has no {toolkit}' >&2; exit 1; }}"),
    )
