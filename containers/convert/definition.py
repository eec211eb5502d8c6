"""`--to def`: the Singularity definition for building on the cluster with --fakeroot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hvd_container.containers.convert.output import TEXT_MODE, check_output_path, creation_mode
from hvd_container.containers.render import render_definition

from hvd_container.core.atomic import write_output
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
    write_output(path, "--output", text, creation_mode(TEXT_MODE))
    return path


def debootstrap_note(recipe: Any, bootstrap: str | None = None) -> str | None:
    """A hint when the definition bootstraps with debootstrap, which the build host must have,
    and, for a recipe of another architecture than amd64, how Apptainer builds it at all."""
    suite = recipe.base.debootstrap_suite if recipe is not None else None
    notes = []
    if suite and bootstrap != "docker":
        notes.append(
            f"note: this definition uses `Bootstrap: debootstrap` (debootstrap must be installed "
            f"where it is built, rare on RHEL/SLES); --bootstrap docker starts from debian:{suite}"
        )
    arch = getattr(recipe, "arch", "amd64") if recipe is not None else "amd64"
    if arch != "amd64":
        notes.append(foreign_arch_note(arch, debootstrap=bool(suite) and bootstrap != "docker"))
    return "\n".join(notes) or None


def foreign_arch_note(arch: str, *, debootstrap: bool) -> str:
    """How a definition of an `arch` recipe is built for `arch`: Apptainer's debootstrap agent
    always bootstraps the build host's own architecture (it passes Go's runtime.GOARCH to
    debootstrap --arch and takes no header for it: apptainer
    internal/pkg/build/sources/conveyorPacker_debootstrap.go), while a `Bootstrap: docker`
    base follows `apptainer build --arch` (the OCI conveyor's platform)."""
    if debootstrap:
        return (
            f"note: the recipe is {arch}, and Apptainer's debootstrap bootstrap builds for the "
            f"build host's own architecture: build this definition on an {arch} machine (a "
            f"compute node of the {arch} partition), or use --bootstrap docker and `apptainer "
            f"build --arch {arch}` (its %post then runs under emulation where the host is not "
            f"{arch}: binfmt_misc with qemu-user-static)"
        )
    return (
        f"note: the recipe is {arch}: build it with `apptainer build --arch {arch}`, which "
        f"pulls the base for {arch} (on a host of another architecture %post runs under "
        "emulation: binfmt_misc with qemu-user-static)"
    )
