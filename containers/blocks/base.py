"""FROM and the build-only settings: the first block of every image."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import block

if TYPE_CHECKING:
    from hvd_container.containers.recipe import Recipe

# testbed/base-image.sh turns `debootstrap:<suite>` into this local image.
DEBOOTSTRAP_IMAGE = "hvd-base/debian:{suite}"


def base_image(recipe: Recipe) -> str:
    """The Docker reference of the recipe's base."""
    suite = recipe.base.debootstrap_suite
    return DEBOOTSTRAP_IMAGE.format(suite=suite) if suite else recipe.base.image


def platform_flag(recipe: Recipe) -> str:
    """`--platform=linux/<arch> ` for non-amd64 recipes, so no builder silently uses its own.

    amd64 keeps a plain FROM: the builders here are amd64, and Docker's build checks flag a
    constant platform where it is not needed.
    """
    return "" if recipe.arch == "amd64" else f"--platform=linux/{recipe.arch} "


def render(recipe: Recipe) -> str:
    return block(
        "base",
        f"FROM {platform_flag(recipe)}{base_image(recipe)}",
        # ARG, not ENV: only the build is non-interactive, the image keeps its default.
        "ARG DEBIAN_FRONTEND=noninteractive",
    )
