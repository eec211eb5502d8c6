"""What `convert` was given: a recipe (file or built-in name) or a Docker image reference."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvd_container.containers.recipe import MultiArch
from hvd_container.containers.recipe_loader import (
    image_arches,
    list_builtin,
    load_images,
    load_recipe,
)


@dataclass(frozen=True)
class Source:
    """The image to convert and, when known, the recipe it was built from."""

    image: str
    recipe: Any = None  # the containers.recipe.LockedRecipe of a recipe source


def resolve_sources(ref: str, arch: str | None = None) -> list[Source]:
    """A path ending in .yaml/.yml or a built-in recipe name is a recipe, each of its images a
    source (arch: only that one's, of a recipe that names several); anything else an image."""
    if not is_recipe(ref):
        return [Source(image=ref)]
    arches = image_arches(ref)
    if arch is not None and arch in arches:
        recipe = load_recipe(ref, arch)
        return [Source(image=recipe.image_tag, recipe=recipe)]
    images = load_images(ref)
    recipes = images.images if isinstance(images, MultiArch) else (images,)
    return [Source(image=recipe.image_tag, recipe=recipe) for recipe in recipes]


def is_recipe(ref: str) -> bool:
    return Path(ref).suffix in (".yaml", ".yml") or ref in list_builtin()


def default_output(image: str, suffix: str) -> Path:
    """Apptainer's naming: `name_tag.sif` from `registry/path/name:tag`."""
    name, _, tag = image.rpartition("/")[2].partition(":")
    tag = tag.split("@", 1)[0] or "latest"
    return Path(re.sub(r"[^A-Za-z0-9._-]", "_", f"{name}_{tag}") + suffix)
