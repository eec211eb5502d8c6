"""`--to def`: the Singularity definition for building on the cluster with --fakeroot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hvd_container.atomic import write_text
from hvd_container.errors import UserError


def write_definition(recipe: Any, target: str | os.PathLike[str] | None = None) -> Path:
    """Render the recipe's definition (containers.render) and write it atomically
    (default target: NAME.def in the current directory)."""
    if recipe is None:
        raise UserError(
            "--to def needs a recipe (a .yaml file or a built-in recipe name), not an image: "
            "the definition is rendered from the recipe"
        )
    from containers.render import render_definition

    path = Path(target) if target is not None else Path(f"{recipe.name}.def")
    write_text(path, render_definition(recipe))
    return path
