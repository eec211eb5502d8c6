"""The file a conversion writes (SIF, definition): checks before any work, and its mode."""

from __future__ import annotations

import os
from pathlib import Path

from hvd_container.core.atomic import output_file
from hvd_container.core.errors import UserError

# sylabs/sif's CreateContainerAtPath creates SIFs 0755 (they start with a launch script);
# a definition is plain text.
SIF_MODE = 0o755
TEXT_MODE = 0o644


def check_output_path(target: Path, suffix: str) -> Path:
    """One-line errors for an --output that is a directory (with the file name it wants), or
    that output_file refuses."""
    if target.is_dir():
        raise UserError(f"--output {target}: is a directory; give a file name ending in {suffix}")
    return output_file(target, "--output")


def creation_mode(mode: int) -> int:
    """mode as open(2) would create it under the current umask (mkstemp files are 0600)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return mode & ~umask
