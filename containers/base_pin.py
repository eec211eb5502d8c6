"""The base image pinned by digest, in the recipe's lock.

A tag moves (NVIDIA rebuilds `nvidia/cuda:11.8.0-...` for security updates, then deletes it),
so `hvd-container lock` asks the registry, through the engine (its credentials and mirrors:
containers/lock.py), for the digest the tag names today and writes it in the lock's header:

    # base nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04 sha256:...

The build's FROM is then `TAG@sha256:...` (Docker and Apptainer take the digest, the tag
stays for people). When the registry cannot be asked, the line says why instead
(`unpinned: ...`) and the build uses the tag. A base made with debootstrap, or one the recipe
already pins (`...@sha256:`), gets no line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hvd_container.containers.recipe import LockedRecipe, Recipe

_LINE = re.compile(r"^# base (\S+) (?:(sha256:[0-9a-f]{64})|unpinned: (.*))$", re.MULTILINE)


@dataclass(frozen=True)
class BasePin:
    image: str  # the recipe's base.image (a tag)
    digest: str | None  # sha256:... or None when the registry could not be asked
    reason: str = ""  # why it is not pinned

    def line(self) -> str:
        state = self.digest or f"unpinned: {self.reason}"
        return f"# base {self.image} {state}\n"

    @property
    def reference(self) -> str:
        """What FROM names: the tag and, when known, the digest that wins over it."""
        return f"{self.image}@{self.digest}" if self.digest else self.image


def needs_pin(recipe: Recipe) -> bool:
    """A registry image named by tag alone (debootstrap bases are made here; a digest in the
    recipe is already a pin)."""
    return recipe.base.debootstrap_suite is None and "@" not in recipe.base.image


def read_pin(lock_text: str | None) -> BasePin | None:
    """The base line of a lock, or None."""
    match = _LINE.search(lock_text or "")
    if match is None:
        return None
    return BasePin(match[1], match[2], match[3] or "")


def pin_of(recipe: LockedRecipe) -> BasePin | None:
    """The pin the recipe's lock gives its base (read_lock refuses a pin of another image)."""
    return read_pin(recipe.lock) if needs_pin(recipe) else None
