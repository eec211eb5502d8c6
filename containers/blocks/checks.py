"""The recipe's checks, each its own RUN so a failure names the check that failed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import block, run
from hvd_container.containers.instructions import Test

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe


def render(recipe: LockedRecipe) -> Block | None:
    if not recipe.checks:
        return None
    runs = [run(check) for check in recipe.checks]
    # RUN at build time, and again by `apptainer test` on the finished image
    return block("checks", *runs, *(Test(check) for check in recipe.checks))
