"""Building blocks: one component per module, each a pure function of the recipe.

A block yields instruction records (containers/instructions.py) tagged with a build phase, or
None when its component is absent; containers/printers/ writes them as a Dockerfile or a
Singularity definition. `BLOCKS` is the layer order: early blocks change rarely and are big
(base, MPI, frameworks), late ones are small and change often (extras, env/labels, checks), so
editing a late part of a recipe rebuilds only late layers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from hvd_container.containers.blocks import (
    base,
    checks,
    cuda,
    env_labels,
    extras,
    gpu_wheels,
    horovod,
    horovod_wheel,
    lightning,
    locked,
    mpi,
    mpi_wheel,
    nccl,
    pip_setup,
    python,
    pytorch,
    tensorflow,
)
from hvd_container.containers.blocks._text import PHASES
from hvd_container.containers.blocks.pip_setup import hvd_pip_script
from hvd_container.containers.instructions import Arg, Block, From, Stage

if TYPE_CHECKING:
    from hvd_container.containers.recipe import LockedRecipe, Recipe

BlockFunction = Callable[["LockedRecipe"], Block | None]

BLOCKS: list[tuple[str, BlockFunction]] = [
    ("base", base.render),
    ("python", python.render),
    ("mpi", mpi.render),
    ("cuda", cuda.render),
    ("nccl", nccl.render),
    ("pip_setup", pip_setup.render),
    ("locked", locked.render),
    ("mpi_wheel", mpi_wheel.render),
    ("gpu_wheels", gpu_wheels.render),
    ("tensorflow", tensorflow.render),
    ("pytorch", pytorch.render),
    ("lightning", lightning.render),
    ("horovod", horovod.render),
    ("extras", extras.render),
    ("env_labels", env_labels.render),
    ("checks", checks.render),
]

# the blocks a stage that compiles Horovod shares with the image: everything before the lock
EARLY = ("base", "python", "mpi", "cuda", "nccl", "pip_setup")
IN_DEPS = ("mpi_wheel", "gpu_wheels")  # laid out in that stage, after its packages

__all__ = ["BLOCKS", "PHASES", "hvd_pip_script", "render_blocks", "render_stages"]


def render_blocks(recipe: LockedRecipe) -> list[tuple[str, Block]]:
    """(block name, block) for every block that applies to the recipe, in layer order."""
    out = []
    for name, render in BLOCKS:
        found = render(recipe)
        if found is not None:
            out.append((name, found))
    return out


def render_stages(recipe: LockedRecipe) -> list[Stage]:
    """The build's stages, the image last: one stage, or Horovod's two first
    (containers/blocks/horovod_wheel.py) and an image that starts from the first and installs
    the second's wheel."""
    blocks = render_blocks(recipe)
    if not horovod_wheel.applies(recipe):
        return [Stage(None, tuple(block for _, block in blocks))]
    early = [block for name, block in blocks if name in EARLY]
    first, *rest = early
    named = tuple(
        replace(item, stage=horovod_wheel.DEPS_STAGE) if isinstance(item, From) else item
        for item in first.items
    )
    deps = horovod_wheel.deps_blocks(recipe, [replace(first, items=named), *rest])
    args = [item for block in early for item in block.items if isinstance(item, Arg)]
    image = [horovod_wheel.image_start(args)] + [
        horovod_wheel.install(recipe) if name == "horovod" else block
        for name, block in blocks
        if name not in EARLY and name not in IN_DEPS
    ]
    return [
        Stage(horovod_wheel.DEPS_STAGE, tuple(deps)),
        Stage(horovod_wheel.STAGE, tuple(horovod_wheel.wheel_blocks(recipe, args))),
        Stage(None, tuple(image)),
    ]


def pip_requirements(recipe: Recipe) -> list[str]:
    """What the recipe's pip steps install, as requirements (the lock resolves exactly these;
    frameworks the base image brings, `source: image`, are not pip's to resolve)."""
    reqs: list[str] = [*mpi_wheel.requirements(recipe), *gpu_wheels.requirements(recipe)]
    tf = recipe.tensorflow
    if tf is not None and tf.source == "pip":
        reqs.append(f"{tf.package}=={tf.version}")
    if recipe.pytorch is not None and recipe.pytorch.source == "pip":
        reqs += pytorch.requirements(recipe)
    if recipe.lightning is not None:
        reqs.append(f"{recipe.lightning.package}=={recipe.lightning.version}")
    if recipe.horovod is not None:
        reqs += [*horovod.BUILD_PYTHON_DEPS, f"horovod=={recipe.horovod.version}"]
    return [*reqs, *recipe.pip]
