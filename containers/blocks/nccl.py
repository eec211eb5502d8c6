"""NCCL from NVIDIA's apt repository (present in nvidia/cuda images), pinned to a version."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import apt_install, block, major_minor

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe, Recipe


def package_version(recipe: Recipe) -> str:
    """`2.15.5` -> `2.15.5-1+cuda11.8`; a full Debian version is used as given."""
    assert recipe.nccl is not None and recipe.cuda is not None
    version = recipe.nccl.version
    if "-" in version or "+" in version:
        return version
    return f"{version}-1+cuda{major_minor(recipe.cuda.version)}"


def render(recipe: LockedRecipe) -> Block | None:
    if recipe.nccl is None or recipe.nccl.source != "apt":  # pip: blocks/gpu_wheels.py
        return None
    pinned = package_version(recipe)
    # nvidia/cuda images apt-mark hold their NCCL; replacing it needs this flag.
    install = apt_install(
        [f"libnccl2={pinned}", f"libnccl-dev={pinned}"], flags="--allow-change-held-packages"
    )
    return block("mpi", install)
