"""The recipe's checks, each its own RUN so a failure names the check that failed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import block, run

if TYPE_CHECKING:
    from hvd_container.containers.recipe import Recipe


def render(recipe: Recipe) -> str:
    if not recipe.checks:
        return ""
    return block("checks", *(run(check) for check in recipe.checks))
