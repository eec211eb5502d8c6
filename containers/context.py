"""Write a recipe's Docker build context (Dockerfile and the files it copies) to a directory."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from hvd_container.containers.render import build_context

from hvd_container.core.atomic import atomic_output
from hvd_container.core.errors import UserError

if TYPE_CHECKING:
    from hvd_container.containers.recipe import LockedRecipe

# executable in the context: Docker's legacy builder copies the mode
EXECUTABLE = ("hvd-pip",)


def write_context(recipe: LockedRecipe, directory: Path) -> list[Path]:
    """Write the build context into directory (created if missing).

    All files are written to temporary names first and renamed at the end; on failure nothing
    is left: no temporary files, and no directory this call created.
    """

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
                mode = 0o755 if name in EXECUTABLE else 0o644
                stack.enter_context(atomic_output(target, mode=mode)).write(data)
                written.append(target)
    except BaseException as exc:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        if isinstance(exc, OSError):
            raise UserError(f"--context {directory}: cannot write: {exc.strerror or exc}") from None
        raise
    return written
