"""`--to def`: the Singularity definition for building on the cluster with --fakeroot."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from hvd_container.containers.convert.output import TEXT_MODE, check_output_path, creation_mode
from hvd_container.containers.render import render_definition

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import UserError

BOOTSTRAPS = ("debootstrap", "docker")


def definition_text(recipe: Any, bootstrap: str | None = None) -> str:
    """The recipe's definition (containers.render); bootstrap="docker" starts a debootstrap
    base from the Docker image of the same Debian suite instead (no debootstrap on the cluster)."""

    if bootstrap is not None and bootstrap not in BOOTSTRAPS:
        raise UserError(
            f"--bootstrap: {bootstrap!r} is not allowed (allowed: {', '.join(BOOTSTRAPS)})"
        )
    suite = recipe.base.debootstrap_suite
    if bootstrap == "debootstrap" and not suite:
        raise UserError(
            f"--bootstrap debootstrap: recipe {recipe.name!r} starts from the Docker image "
            f"{recipe.base.image!r}, not from a Debian mirror (allowed here: docker)"
        )
    return render_definition(recipe, docker_bootstrap=bootstrap == "docker")


def write_definition(
    recipe: Any, target: str | os.PathLike[str] | None = None, *, bootstrap: str | None = None
) -> Path:
    """Render the recipe's definition and write it atomically (default target: NAME.def in the
    current directory). Nothing is written when the target cannot be."""
    if recipe is None:
        raise UserError(
            "--to def needs a recipe (a .yaml file or a built-in recipe name), not an image: "
            "the definition is rendered from the recipe"
        )
    path = check_output_path(
        Path(target) if target is not None else Path(f"{recipe.name}.def"), ".def"
    )
    text = definition_text(recipe, bootstrap)
    try:
        write_text(path, text, mode=creation_mode(TEXT_MODE))
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EISDIR):
            raise UserError(f"--output {path}: cannot write there: {exc.strerror}") from None
        raise
    return path


def debootstrap_note(recipe: Any, bootstrap: str | None = None) -> str | None:
    """A hint when the definition bootstraps with debootstrap, which the build host must have."""
    suite = recipe.base.debootstrap_suite if recipe is not None else None
    if not suite or bootstrap == "docker":
        return None
    return (
        f"note: this definition uses `Bootstrap: debootstrap` (debootstrap must be installed "
        f"where it is built, rare on RHEL/SLES); --bootstrap docker starts from debian:{suite}"
    )
