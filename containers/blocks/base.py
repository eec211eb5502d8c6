"""FROM, the build-only settings and what the image is: the first block of every image."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.base_pin import pin_of
from hvd_container.containers.blocks._text import block
from hvd_container.containers.instructions import Arg, From, Help, Instruction

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe, Recipe


def debootstrap_image(suite: str, arch: str) -> str:
    """The local image testbed/base-image.sh makes of `debootstrap:<suite>` for arch: another
    architecture's under a name of its own (a name holds one image, and FROM --platform checks
    the architecture of the image it names)."""
    return f"hvd-base/debian:{suite}" if arch == "amd64" else f"hvd-base/debian:{suite}-{arch}"


def debootstrap_script_args(suite: str, arch: str) -> list[str]:
    """The arguments testbed/base-image.sh takes to make debootstrap_image(suite, arch)."""
    return [suite] if arch == "amd64" else ["--arch", arch, suite]


def base_image(recipe: LockedRecipe) -> str:
    """The Docker reference of the recipe's base: with the digest its lock pins, if any."""
    suite = recipe.base.debootstrap_suite
    if suite:
        return debootstrap_image(suite, recipe.arch)
    pin = pin_of(recipe)
    return pin.reference if pin else recipe.base.image


def platform(recipe: Recipe) -> str | None:
    """`linux/<arch>` for non-amd64 recipes, so no builder silently uses its own.

    amd64 keeps a plain FROM: the builders here are amd64, and Docker's build checks flag a
    constant platform where it is not needed.
    """
    return None if recipe.arch == "amd64" else f"linux/{recipe.arch}"


def render(recipe: LockedRecipe) -> Block | None:
    items: list[Instruction] = [
        From(base_image(recipe), platform(recipe), recipe.base.debootstrap_suite),
        # ARG, not ENV: only the build is non-interactive, the image keeps its default.
        Arg("DEBIAN_FRONTEND", "noninteractive"),
    ]
    if recipe.description:
        items.append(Help(recipe.description))
    return block("base", *items)
