"""Dockerfile building blocks: one component per module, each a pure function of the recipe.

`BLOCKS` is the layer order: early blocks change rarely and are big (base, MPI, frameworks),
late ones are small and change often (extras, env/labels, checks), so editing a late part of
a recipe rebuilds only late layers. Each block returns "" when its component is absent, else
text starting with a `# hvd-container phase: <phase>` marker line.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from typing import TYPE_CHECKING

from hvd_container.containers.blocks import (
    base,
    checks,
    cuda,
    env_labels,
    extras,
    horovod,
    lightning,
    mpi,
    nccl,
    pip_setup,
    python,
    pytorch,
    tensorflow,
)
from hvd_container.containers.blocks._text import MARKER_PREFIX, PHASES

if TYPE_CHECKING:
    from hvd_container.containers.recipe import Recipe

Block = Callable[["Recipe"], str]

BLOCKS: list[tuple[str, Block]] = [
    ("base", base.render),
    ("python", python.render),
    ("mpi", mpi.render),
    ("cuda", cuda.render),
    ("nccl", nccl.render),
    ("pip_setup", pip_setup.render),
    ("tensorflow", tensorflow.render),
    ("pytorch", pytorch.render),
    ("lightning", lightning.render),
    ("horovod", horovod.render),
    ("extras", extras.render),
    ("env_labels", env_labels.render),
    ("checks", checks.render),
]

__all__ = ["BLOCKS", "MARKER_PREFIX", "PHASES", "hvd_pip_script", "render_blocks"]


def render_blocks(recipe: Recipe) -> list[tuple[str, str]]:
    """(block name, text) for every block that applies to the recipe, in layer order."""
    out = []
    for name, render in BLOCKS:
        text = render(recipe)
        if text:
            out.append((name, text))
    return out


def hvd_pip_script() -> bytes:
    """The hvd-pip wrapper COPYed into every image (see hvd-pip.sh)."""
    return files(__name__).joinpath("hvd-pip.sh").read_bytes()
