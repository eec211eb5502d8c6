"""The recipe's extra apt and pip packages: late, small layers, apt before pip."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import apt_install, block, pip_install, run

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe


def render(recipe: LockedRecipe) -> Block | None:
    lines = []
    if recipe.apt:
        lines.append(apt_install(recipe.apt))
    if recipe.pip and recipe.lock is None:  # with a lock, the locked block installed them
        lines.append(run(pip_install(*(shlex.quote(p) for p in recipe.pip))))
    return block("extras", *lines) if lines else None
