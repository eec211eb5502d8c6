"""Reading recipes: a file or a built-in name -> a validated `Recipe`, with its lock a
`LockedRecipe`.

`load_recipe` reads one, resolves `extends:` (deep merge: mappings merge, everything else
replaces, `null` removes), validates it, checks the parts' compatibility and reads the lock
beside its file. Every error is one line naming the file, line and key path.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import get_args

from hvd_container.containers.blocks import pip_requirements
from hvd_container.containers.compat import check_compatibility
from hvd_container.containers.lockfile import MAX_LOCK_BYTES, inputs_digest, read_lock
from hvd_container.containers.recipe import (
    PATTERN_WORDS,
    Arch,
    LockedRecipe,
    MultiArch,
    Recipe,
    arch_tag,
    canonical_arch,
)

from hvd_container import recipes
from hvd_container.core import yamlconf
from hvd_container.core.errors import UserError
from hvd_container.core.files import read_limited_text
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


def read_recipe(ref: str | Path, arch: str | None = None) -> Recipe:
    """Read, merge (`extends:`) and validate a recipe given by path or built-in name, without
    its lock (as `lock` reads a recipe to lock it, and the launch side its facts).

    arch: the recipe of that architecture's image (needed where the recipe names several)."""
    return _read(ref, arch)[0]


def image_arches(ref: str | Path, arches: Sequence[str] = ()) -> list[str | None]:
    """The architectures ref's images are for: arches when given, else those the recipe
    names; [None]: the one image of a recipe that names one architecture."""
    if not arches:
        layered = yamlconf.load_layered(_resolve_ref(ref), _resolve_ref, "a recipe name or a path")
        arches = named_arches(layered) or []
    return list(dict.fromkeys(arches)) or [None]


ARCHES: tuple[str, ...] = get_args(Arch)


def named_arches(layered: yamlconf.Layered) -> list[str] | None:
    """The list `arch:` names (checked), or None where it names one architecture."""
    value = layered.data.get("arch")
    if not isinstance(value, list):
        return None
    where = layered.where(("arch",))
    allowed = ", ".join(ARCHES)
    if not value:
        raise UserError(f"{where}: arch: an empty list (allowed: one or more of {allowed})")
    named = [canonical_arch(item) for item in value]
    for item, given in zip(named, value, strict=True):
        if item not in ARCHES:
            raise UserError(
                f"{where}: arch: {str(given)!r} is not an architecture (allowed: {allowed})"
            )
    if len(set(named)) != len(named):
        raise UserError(f"{where}: arch: each architecture may appear once")
    return [str(item) for item in named]


def _read(ref: str | Path, arch: str | None = None) -> tuple[Recipe, yamlconf.Layered, Path, bool]:
    """(recipe, its layers, its file, whether it is one of several images: VERSION-ARCH)."""
    path = _resolve_ref(ref)
    layered = yamlconf.load_layered(path, _resolve_ref, "a recipe name or a path")
    arches = named_arches(layered)
    data = layered.data
    if arches is not None and arch is None:
        raise UserError(
            f"{layered.where(('arch',))}: recipe {data.get('name')} makes an image for each of "
            f"{', '.join(arches)}: name one (--arch)"
        )
    arch = canonical_arch(arch)
    split = arch is not None and (
        arches is not None or arch != canonical_arch(data.get("arch", "amd64"))
    )
    if arch is not None:
        if arch not in ARCHES:
            raise UserError(f"--arch {arch}: not an architecture (allowed: {', '.join(ARCHES)})")
        data = {**data, "arch": arch}
    recipe = yamlconf.validate(Recipe, layered, data, PATTERN_WORDS)
    if split:
        recipe = recipe.model_copy(update={"version": arch_tag(recipe.version, recipe.arch)})
    check_compatibility(recipe, layered)
    return recipe, layered, path, split


def lock_file(path: Path, recipe: Recipe, split: bool) -> Path:
    """NAME.lock beside the recipe; NAME.ARCH.lock for one of several images' (each its own
    resolution: the wheels differ by architecture)."""
    return path.with_suffix(f".{recipe.arch}.lock" if split else ".lock")


def recipe_lock_file(ref: str | Path, arch: str | None = None) -> tuple[Recipe, Path]:
    """The recipe (of arch's image) and the lock file its build installs."""
    recipe, _layered, path, split = _read(ref, arch)
    return recipe, lock_file(path, recipe, split)


def inherited_lock(ref: str | Path, arch: str | None = None) -> str | None:
    """The lock beside the nearest recipe that ref extends (that lock's own image), or None:
    the pins a first lock of a derived recipe starts from."""
    recipe, layered, _path, split = _read(ref, arch)
    for doc in layered.docs[1:]:
        parent = lock_file(Path(doc.source), recipe, split)
        if parent.is_file():
            return read_limited_text(parent, "a lock file", MAX_LOCK_BYTES, "a lock file")
    return None


def load_recipe(ref: str | Path, arch: str | None = None) -> LockedRecipe:
    """The recipe with the lock next to its file: what a build installs. A recipe that takes
    parts from PyPI and has no lock is LockMissing, with the command that makes it.

    arch: the recipe of that architecture's image (needed where the recipe names several)."""
    return _load(ref, arch)[0]


def _load(ref: str | Path, arch: str | None) -> tuple[LockedRecipe, bool]:
    recipe, layered, path, split = _read(ref, arch)
    lock_path = lock_file(path, recipe, split)
    lock = read_lock(lock_path, lock_inputs_digest(recipe), recipe.base.image, str(ref))
    if lock is None and recipe.parts_needing_a_lock:
        parts = " and ".join(recipe.parts_needing_a_lock)
        inherited = (
            " (a recipe that extends another does not take its lock)"
            if len(layered.docs) > 1
            else ""
        )
        command = f"hvd-container lock {ref}" + (f" --arch {recipe.arch}" if split else "")
        raise LockMissing(
            f"{path}: recipe {recipe.name} takes {parts} from PyPI, which a build installs "
            f"only from a lock, and {lock_path} does not exist{inherited}: make it with "
            f"`{command}`",
            command=command,
        )
    return LockedRecipe.of(recipe, lock), split


def makes_image_for(ref: str | Path, arch: str) -> bool:
    """Whether `build ref --arch arch` can make that architecture's image: the recipe takes
    nothing from PyPI, or the lock of that image lies beside it (NAME.ARCH.lock)."""
    recipe, lock = recipe_lock_file(ref, arch)
    return lock.is_file() or not recipe.parts_needing_a_lock


def load_images(ref: str | Path, arches: Sequence[str] = ()) -> LockedRecipe | MultiArch:
    """Every image ref makes: its one LockedRecipe, or a MultiArch where it makes several (a
    recipe naming several architectures, or arches other than its own asked for)."""
    loaded = [_load(ref, arch) for arch in image_arches(ref, arches)]
    if len(loaded) == 1 and not loaded[0][1]:
        return loaded[0][0]
    images = tuple(recipe for recipe, _split in loaded)
    return MultiArch(images[0].name, _plain_version(images[0]), images)


def _plain_version(recipe: Recipe) -> str:
    return recipe.version.removesuffix(f"-{recipe.arch}")


class LockMissing(UserError):
    """A recipe that needs a lock to build or render, and has none yet."""

    def __init__(self, message: str, *, command: str) -> None:
        super().__init__(message)
        self.command = command


def load_recipe_to_read(ref: str | Path, arch: str | None = None) -> tuple[Recipe, list[str]]:
    """The recipe as `recipes validate` and `recipes show` read it, with notes: what it
    inherits that a reader may not expect (inheritance_notes: for the author of a recipe file,
    not of a built-in one, which its user cannot edit), and, without its lock where it has
    none yet, that build and render need one (and the command that makes it)."""
    recipes, notes = images_to_read(ref, [arch])
    return recipes[0], notes


def images_to_read(
    ref: str | Path, arches: Sequence[str | None] | None = None
) -> tuple[list[Recipe], list[str]]:
    """Each image of the recipe (of `arches`, default: all it makes) as load_recipe_to_read
    reads it, and one list of notes: a recipe of several images that lacks their locks is told
    the one `lock` command that makes them all."""
    recipes: list[Recipe] = []
    missing: list[str] = []
    for arch in arches or image_arches(ref):
        try:
            recipes.append(load_recipe(ref, arch))
        except LockMissing as exc:
            recipes.append(read_recipe(ref, arch))
            missing.append(exc.command)
    notes = [] if is_builtin(ref) else inheritance_notes(ref)
    if len(missing) == 1:
        notes.append(f"no lock yet: build and render need one: `{missing[0]}`")
    elif missing:
        notes.append(
            f"no locks yet: build and render need one for each image: `hvd-container lock {ref}` "
            "makes them"
        )
    return recipes, notes


def is_builtin(ref: str | Path) -> bool:
    """Whether a recipe reference names a recipe shipped with the package (not a file)."""
    return recipe_file(ref).resolve() == builtin_path(str(ref)).resolve()


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
