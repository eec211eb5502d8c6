"""Write files so that an interrupted run never leaves a half-written target behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from hvd_container.core.errors import UserError
from hvd_container.core.files import special_kind


@contextlib.contextmanager
def atomic_output(target: str | os.PathLike[str], mode: int = 0o644) -> Iterator[BinaryIO]:
    """Yield a binary file in the target's directory; rename it onto the target on success.

    On any exception (including KeyboardInterrupt) the temporary file is removed. A target that
    is there and is neither a regular file nor a link (a device, pipe, socket or directory) is
    refused: the rename would replace it.
    """
    path = Path(target)
    kind = special_kind(path)
    if kind is not None:  # a rename onto it would destroy it: as root, /dev/null itself
        raise UserError(f"{path}: is {kind}; only a regular file is replaced")
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(target: str | os.PathLike[str], text: str, mode: int = 0o644) -> None:
    """Atomically write text (UTF-8) to target."""
    with atomic_output(target, mode) as fh:
        fh.write(text.encode())


def output_file(target: str | os.PathLike[str], flag: str) -> Path:
    """The file that `flag` names, refused in one line before any work is done for it: a
    symbolic link (replacing it, or writing through it, would surprise someone), what is not a
    regular file (a directory; a device, pipe or socket the new file would replace), a file in a
    directory that does not exist."""
    path = Path(target)
    if path.is_symlink():
        raise UserError(
            f"{flag} {target}: is a symbolic link (to {os.readlink(path)}); name the file "
            "itself, or remove the link"
        )
    kind = special_kind(path)
    if kind is not None:
        raise UserError(f"{flag} {target}: is {kind}, expected a file path")
    if not path.parent.exists():
        raise UserError(f"{flag} {target}: directory {path.parent} does not exist")
    return path


def write_output(target: str | os.PathLike[str], flag: str, text: str, mode: int = 0o644) -> None:
    """write_text to the file that `flag` names (checked as output_file does); a failure is one
    line naming the flag, and the temporary file is gone already: nothing half-written."""
    path = output_file(target, flag)
    try:
        write_text(path, text, mode)
    except OSError as exc:
        raise UserError(f"{flag} {target}: cannot write: {exc.strerror or exc}") from None
