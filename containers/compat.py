"""Combinations known from the field not to work, refused with the reason and the fix.

Each rule is a function (recipe) -> (key path, message) | None; `check_compatibility` raises the
first failure as a one-line UserError pointing at the recipe line that set the key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from packaging.version import Version

from hvd_container import yamlconf
from hvd_container.errors import UserError

if TYPE_CHECKING:
    from containers.recipe import Recipe

Problem = tuple[tuple[str, ...], str]
Rule = Callable[["Recipe"], Problem | None]


def horovod_cxx17_patch(recipe: Recipe) -> Problem | None:
    """Horovod <= 0.28.1 sets C++14; torch >= 2.1 headers need C++17."""
    hvd, torch = recipe.horovod, recipe.pytorch
    if hvd is None or torch is None or "pytorch" not in hvd.frameworks:
        return None
    too_old = Version(hvd.version) <= Version("0.28.1")
    if too_old and Version(torch.version) >= Version("2.1") and "cxx17" not in hvd.patches:
        return (
            ("horovod", "patches"),
            f"horovod {hvd.version} does not compile against torch {torch.version} "
            "(its CMake files set C++14, torch >= 2.1 headers need C++17): add `cxx17` to "
            "horovod.patches",
        )
    return None


RULES: list[Rule] = [horovod_cxx17_patch]


def check_compatibility(recipe: Recipe, doc: yamlconf.Document) -> None:
    for rule in RULES:
        problem = rule(recipe)
        if problem is not None:
            path, message = problem
            raise UserError(f"{doc.where(path)}: {'.'.join(path)}: {message}")
