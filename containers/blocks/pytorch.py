"""PyTorch (+ torchvision, torchaudio) wheels for one CUDA tag (cpu, cu117, ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import block, module_version_check, pip_install, run

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe, Recipe

WHEEL_INDEX = "https://download.pytorch.org/whl/{tag}"


def index_url(recipe: Recipe) -> str | None:
    """The wheel index for the recipe's CUDA tag, when wheels come from download.pytorch.org."""
    torch = recipe.pytorch
    if torch is None or torch.cuda_tag is None or torch.wheel_index != "download.pytorch.org":
        return None
    return WHEEL_INDEX.format(tag=torch.cuda_tag)


def requirements(recipe: Recipe) -> list[str]:
    """`torch==1.12.1+cu113`, ...: the local tag pins the CUDA build, not only the version
    (PyPI's own builds have none: `wheel_index: pypi` pins the plain version)."""
    torch = recipe.pytorch
    assert torch is not None
    suffix = f"+{torch.cuda_tag}" if torch.cuda_tag and torch.wheel_index != "pypi" else ""
    pins = [("torch", torch.version), ("torchvision", torch.torchvision)]
    pins.append(("torchaudio", torch.torchaudio))
    return [f"{name}=={version}{suffix}" for name, version in pins if version]


def render(recipe: LockedRecipe) -> Block | None:
    torch = recipe.pytorch
    if torch is None:
        return None
    if torch.source == "image" or recipe.lock is not None:  # the base image or the lock has it
        return block("frameworks", run(module_version_check("torch", torch.version)))
    url = index_url(recipe)
    args = ([f"--extra-index-url {url}"] if url else []) + requirements(recipe)
    return block("frameworks", run(pip_install(*args)))
