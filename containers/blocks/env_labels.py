"""The recipe's environment and labels, plus labels naming the recipe the image came from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import block, env, label

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import Recipe

LABEL_PREFIX = "org.hvd-container."


def recipe_labels(recipe: Recipe) -> dict[str, str]:
    return {
        f"{LABEL_PREFIX}recipe.name": recipe.name,
        f"{LABEL_PREFIX}recipe.version": recipe.version,
        f"{LABEL_PREFIX}recipe.digest": recipe.digest(),
        f"{LABEL_PREFIX}arch": recipe.arch,
    }


def render(recipe: Recipe) -> Block | None:
    labels = {**recipe.labels, **recipe_labels(recipe)}
    return block(
        "extras",
        *(env(k, v) for k, v in recipe.env.items()),
        *(label(k, v) for k, v in labels.items()),
    )
