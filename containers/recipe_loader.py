"""Reading recipes: a file or a built-in name -> a validated `Recipe`, with its lock a
`LockedRecipe`.

`load_recipe` reads one, resolves `extends:` (deep merge: mappings merge, everything else
replaces, `null` removes), validates it, checks the parts' compatibility and reads the lock
beside its file. Every error is one line naming the file, line and key path.
"""

from __future__ import annotations

from pathlib import Path

from hvd_container.containers.blocks import pip_requirements
from hvd_container.containers.compat import check_compatibility
from hvd_container.containers.lockfile import inputs_digest, read_lock
from hvd_container.containers.recipe import PATTERN_WORDS, LockedRecipe, Recipe

from hvd_container import recipes
from hvd_container.core import yamlconf
from hvd_container.core.errors import UserError
from hvd_container.core.text import did_you_mean


def lock_inputs_digest(recipe: Recipe) -> str:
    """What a current lock of this recipe was made from (its header says it)."""
    return inputs_digest(pip_requirements(recipe), recipe.python.version, recipe.pip_platform)


def list_builtin() -> list[str]:
    """Names of the recipes shipped with the package."""
    return recipes.names()


def builtin_path(name: str) -> Path:
    """The file of a built-in recipe."""
    return recipes.path() / f"{name}.yaml"


def recipe_file(ref: str | Path) -> Path:
    """The file a recipe reference (path or built-in name) names."""
    return _resolve_ref(ref)


def _resolve_ref(ref: str | Path, relative_to: Path | None = None) -> Path:
    candidate = Path(ref)
    if relative_to is not None and not candidate.is_absolute():
        sibling = relative_to.parent / candidate
        if sibling.exists():
            return sibling
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        return candidate
    builtin = recipes.path() / f"{ref}.yaml"
    if builtin.exists():
        return builtin
    known = ", ".join(list_builtin())
    near = did_you_mean(str(ref), list_builtin())
    raise UserError(
        f"recipe {str(ref)!r}: no such file and no built-in recipe of that name{near} (built-in: {known})"
    )


def read_recipe(ref: str | Path) -> Recipe:
    """Read, merge (`extends:`) and validate a recipe given by path or built-in name, without
    its lock (as `lock` reads a recipe to lock it, and the launch side its facts)."""
    return _read(ref)[0]


def _read(ref: str | Path) -> tuple[Recipe, yamlconf.Layered, Path]:
    path = _resolve_ref(ref)
    layered = yamlconf.load_layered(path, _resolve_ref, "a recipe name or a path")
    recipe = yamlconf.validate(Recipe, layered, layered.data, PATTERN_WORDS)
    check_compatibility(recipe, layered)
    return recipe, layered, path


def load_recipe(ref: str | Path) -> LockedRecipe:
    """The recipe with the lock next to its file: what a build installs. A recipe that takes
    parts from PyPI and has no lock is LockMissing, with the command that makes it."""
    recipe, layered, path = _read(ref)
    lock_path = path.with_suffix(".lock")
    lock = read_lock(lock_path, lock_inputs_digest(recipe), recipe.base.image, str(ref))
    if lock is None and recipe.parts_needing_a_lock:
        parts = " and ".join(recipe.parts_needing_a_lock)
        inherited = (
            " (a recipe that extends another does not take its lock)"
            if len(layered.docs) > 1
            else ""
        )
        raise LockMissing(
            f"{path}: recipe {recipe.name} takes {parts} from PyPI, which a build installs "
            f"only from a lock, and {lock_path} does not exist{inherited}: make it with "
            f"`hvd-container lock {ref}`",
            command=f"hvd-container lock {ref}",
        )
    return LockedRecipe.of(recipe, lock)


class LockMissing(UserError):
    """A recipe that needs a lock to build or render, and has none yet."""

    def __init__(self, message: str, *, command: str) -> None:
        super().__init__(message)
        self.command = command


def load_recipe_to_read(ref: str | Path) -> tuple[Recipe, list[str]]:
    """The recipe as `recipes validate` and `recipes show` read it, with notes: what it
    inherits that a reader may not expect (inheritance_notes), and, without its lock where it
    has none yet, that build and render need one (and the command that makes it)."""
    recipe: Recipe
    try:
        recipe, notes = load_recipe(ref), []
    except LockMissing as exc:
        recipe = read_recipe(ref)
        notes = [f"no lock yet: build and render need one: `{exc.command}`"]
    return recipe, [*inheritance_notes(ref), *notes]


def inheritance_notes(ref: str | Path) -> list[str]:
    """What `extends:` does that a reader may not expect: a list the recipe gives replaces the
    inherited one (lists do not merge), and a description it does not give is its parent's."""
    layered = yamlconf.load_layered(_resolve_ref(ref), _resolve_ref, "a recipe name or a path")
    if len(layered.docs) == 1:
        return []
    notes = [
        f"{where} replaces the inherited list, without {', '.join(map(str, dropped[:3]))}"
        f"{f' and {len(dropped) - 3} more' if len(dropped) > 3 else ''} (lists replace, they "
        "do not merge: repeat an item to keep it)"
        for where, dropped in layered.replaced_lists()
    ]
    if "description" not in layered.docs[0].data and "description" in layered.inherited:
        notes.append(
            f"{layered.docs[0].source}: description: inherited word for word from "
            f"{layered.docs[1].source}: give the recipe its own"
        )
    return notes
