"""FROM, the build args and hvd-pip: the first block of every image."""

from __future__ import annotations

from typing import TYPE_CHECKING

from containers.blocks._text import HVD_PIP, block

if TYPE_CHECKING:
    from containers.recipe import Recipe

# testbed/base-image.sh turns `debootstrap:<suite>` into this local image.
DEBOOTSTRAP_IMAGE = "hvd-base/debian:{suite}"


def base_image(recipe: Recipe) -> str:
    """The Docker reference of the recipe's base."""
    suite = recipe.base.debootstrap_suite
    return DEBOOTSTRAP_IMAGE.format(suite=suite) if suite else recipe.base.image


def render(recipe: Recipe) -> str:
    return block(
        "base",
        f"FROM {base_image(recipe)}",
        # Empty by default: hvd-pip then uses the image's own pip configuration.
        "ARG HVD_PIP_CONFIG_URL=",
        # ARG, not ENV: only the build is non-interactive, the image keeps its default.
        "ARG DEBIAN_FRONTEND=noninteractive",
        f"COPY hvd-pip {HVD_PIP}",
        # The legacy builder has no COPY --chmod; the context's file mode is not guaranteed.
        f"RUN chmod 0755 {HVD_PIP}",
    )
