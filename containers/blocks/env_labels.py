"""The recipe's environment and labels, plus labels naming the recipe the image came from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import block, env, label

from hvd_container import facts

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe


def render(recipe: LockedRecipe) -> Block | None:
    named = facts.recipe_labels(recipe.name, recipe.version, recipe.digest(), recipe.arch)
    labels = {**recipe.labels, **named}
    return block(
        "extras",
        *(env(k, v) for k, v in recipe.env.items()),
        *(label(k, v) for k, v in labels.items()),
    )
