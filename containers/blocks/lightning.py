"""PyTorch Lightning (`lightning` or the older `pytorch-lightning` package)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import block, module_version_check, pip_install, run

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe


def render(recipe: LockedRecipe) -> Block | None:
    lit = recipe.lightning
    if lit is None:
        return None
    if recipe.lock is not None:  # the lock has it
        module = "lightning" if lit.package == "lightning" else "pytorch_lightning"
        return block("frameworks", run(module_version_check(module, lit.version)))
    return block("frameworks", run(pip_install(f"{lit.package}=={lit.version}")))
