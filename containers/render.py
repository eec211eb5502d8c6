"""Recipe -> Dockerfile, Docker build context and Singularity definition.

Pure functions of the recipe: the same recipe always renders to the same bytes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from hvd_container.containers.blocks import hvd_pip_script, render_blocks

if TYPE_CHECKING:
    from hvd_container.containers.recipe import Recipe

FORMATS = ("docker", "singularity")


def render_dockerfile(recipe: Recipe) -> str:
    """The Dockerfile of the recipe: one stage, blocks in layer order."""
    header = (
        f"# Rendered by hvd-container from recipe {recipe.name} {recipe.version}.\n"
        "# Do not edit: change the recipe and render again.\n"
    )
    return header + "\n".join(text for _, text in render_blocks(recipe))


def build_context(recipe: Recipe) -> dict[str, bytes]:
    """Every file the Docker build needs, by path inside the context."""
    return {
        "Dockerfile": render_dockerfile(recipe).encode(),
        "hvd-pip": hvd_pip_script(),
    }


def write_context(recipe: Recipe, directory: Path) -> list[Path]:
    """Write the build context into directory (created if missing).

    All files are written to temporary names first and renamed at the end; on failure nothing
    is left: no temporary files, and no directory this call created.
    """
    import contextlib
    import shutil

    from hvd_container.core.atomic import atomic_output
    from hvd_container.core.errors import UserError

    if directory.exists() and not directory.is_dir():
        raise UserError(f"--context {directory}: exists and is not a directory")
    created = None  # the outermost directory this call creates
    probe = directory
    while not probe.exists() and probe.parent != probe:
        created, probe = probe, probe.parent
    written = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:
            for name, data in build_context(recipe).items():
                target = directory / name
                mode = 0o755 if name == "hvd-pip" else 0o644
                stack.enter_context(atomic_output(target, mode=mode)).write(data)
                written.append(target)
    except BaseException as exc:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        if isinstance(exc, OSError):
            raise UserError(f"--context {directory}: cannot write: {exc.strerror or exc}") from None
        raise
    return written


def render_definition(recipe: Recipe) -> str:
    """The Singularity/Apptainer definition, converted from the Dockerfile by spython and fixed."""
    from hvd_container.containers.singularity_def import dockerfile_to_definition

    context = build_context(recipe)
    # spython copies `--platform=...` into `From:`; Apptainer/Singularity build for the machine
    # they run on, so the definition names the image only (the arch stays in the labels).
    dockerfile = re.sub(
        r"^FROM --platform=\S+ ", "FROM ", context["Dockerfile"].decode(), flags=re.M
    )
    return dockerfile_to_definition(dockerfile, context, recipe)


def render(recipe: Recipe, fmt: str) -> str:
    if fmt == "docker":
        return render_dockerfile(recipe)
    if fmt == "singularity":
        return render_definition(recipe)
    raise ValueError(f"unknown format {fmt!r} (allowed: {', '.join(FORMATS)})")
