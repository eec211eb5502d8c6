"""What `convert` was given: a recipe (file or built-in name) or a Docker image reference."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvd_container.containers.recipe_loader import list_builtin, load_recipe


@dataclass(frozen=True)
class Source:
    """The image to convert and, when known, the recipe it was built from."""

    image: str
    recipe: Any = None  # containers.recipe.Recipe (imported lazily: pydantic models are heavy)


def resolve_source(ref: str) -> Source:
    """A path ending in .yaml/.yml or a built-in recipe name is a recipe; anything else an image."""

    if Path(ref).suffix in (".yaml", ".yml") or ref in list_builtin():
        recipe = load_recipe(ref)
        return Source(image=recipe.image_tag, recipe=recipe)
    return Source(image=ref)


def default_output(image: str, suffix: str) -> Path:
    """Apptainer's naming: `name_tag.sif` from `registry/path/name:tag`."""
    name, _, tag = image.rpartition("/")[2].partition(":")
    tag = tag.split("@", 1)[0] or "latest"
    return Path(re.sub(r"[^A-Za-z0-9._-]", "_", f"{name}_{tag}") + suffix)
