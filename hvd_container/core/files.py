"""Open files that others give us (recipes, profiles, SIF images) without trusting their kind."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from hvd_container.core.errors import UserError

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def open_regular(path: str | os.PathLike[str], expected: str) -> tuple[BinaryIO, int]:
    """(binary file, size) of a regular file; anything else is a one-line UserError naming
    what it is. Opened with O_NONBLOCK, so that a named pipe cannot block the open, and
    checked with fstat on that descriptor (no race with a path swapped in between)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{p}: is a directory, expected {expected}") from None
    except OSError as exc:
        # A socket cannot be opened at all (ENXIO): say what it is rather than the errno.
        problem = not_a_file(p, expected)
        raise UserError(f"{p}: {problem or 'cannot open: ' + (exc.strerror or str(exc))}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise UserError(f"{p}: is {kind}, expected {expected}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), info.st_size
    except BaseException:
        os.close(fd)
        raise


def not_a_file(
    path: str | os.PathLike[str], expected: str, *, directory: bool = False
) -> str | None:
    """What `path` is when it is not a regular file (nor, with `directory`, a directory):
    "is a named pipe, expected ..."; None for one that is, or that does not exist. Asked with
    stat, which never opens it (opening a named pipe blocks until someone writes to it)."""
    kind = special_kind(path, follow_links=True)
    if kind is None or (directory and kind == _KINDS[stat.S_IFDIR]):
        return None
    return f"is {kind}, expected {expected}"


def special_kind(path: str | os.PathLike[str], *, follow_links: bool = False) -> str | None:
    """What `path` is when it exists and is neither a regular file nor (unless `follow_links`:
    then what it leads to is asked) a symbolic link ("a directory", "a named pipe", "a character
    device", ...), else None. Asked with lstat or stat: never opened."""
    try:
        mode = (os.stat if follow_links else os.lstat)(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def user_path(text: str) -> Path:
    """A path as the user wrote it, `~` and `~user` expanded where they can be (an unknown
    user, or no home directory, leaves it as written: Path.expanduser would raise)."""
    try:
        return Path(text).expanduser()
    except RuntimeError:
        return Path(text)


def read_limited_text(path: str | os.PathLike[str], what: str, limit: int, kind: str) -> str:
    """A regular file's UTF-8 text, at most limit bytes; anything else is a one-line UserError.
    what: the file's kind in `not <what>` messages ("a YAML file"); kind: what has at most limit
    bytes ("a recipe or site profile")."""
    p = Path(path)
    fh, size = open_regular(p, what)
    with fh:
        if size > limit:
            raise UserError(f"{p}: {size} bytes, more than {kind} has (at most {limit})")
        try:
            raw = fh.read(limit + 1)
        except OSError as exc:
            raise UserError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > limit:  # grew while being read
        raise UserError(f"{p}: more than {limit} bytes, more than {kind} has")
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a UTF-8 text file") from None


def untrusted_because(path: str | os.PathLike[str]) -> str | None:
    """Why a configuration file at `path` cannot be trusted, or None: as OpenSSH treats its
    own files, the file and every folder above it must be owned by the user or root and not
    writable by group or others. A folder that others may write but that has the sticky bit
    and belongs to root (/tmp) is fine: there only an entry's owner can rename or remove it.
    A link is judged by what it points to (and its own folders were judged on the way)."""
    me = os.geteuid()
    p = Path(os.path.abspath(path))
    try:
        real = p.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        return f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
    checked: list[Path] = [real, *real.parents]
    if p != real:  # the folders the link sits in decide too: another user could swap it
        checked += [p.parent, *p.parent.parents]
    seen: set[Path] = set()
    for node in checked:
        if node in seen:
            continue
        seen.add(node)
        try:
            info = os.stat(node)
        except OSError as exc:
            return f"{node}: cannot be checked ({exc.strerror or exc})"
        if node != real:
            what = f"its folder {node}"
        else:
            what = f"the folder {node}" if stat.S_ISDIR(info.st_mode) else "the file"
        if info.st_uid not in (me, 0):
            return f"{what} belongs to another user (uid {info.st_uid})"
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        sticky_root = (
            stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX and info.st_uid == 0
        )
        if writable and not sticky_root:
            who = (
                "group and others"
                if writable == (stat.S_IWGRP | stat.S_IWOTH)
                else ("its group" if writable & stat.S_IWGRP else "others")
            )
            return f"{what} is writable by {who} (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def private_folder(parent: Path, name: str, purpose: str) -> Path:
    """parent/name for the tool's own files that a job reads back (a smoke program, a
    rendezvous address, Jupyter's state): made here with mode 0700, never through a link,
    owned by the user; and parent's path writable by nobody else, or another user could
    rename the folder away and put theirs in its place while the job waits in the queue."""
    why = untrusted_because(parent)
    if why is not None:
        raise UserError(
            f"{parent}: {why}: {purpose} would be read back from there, where another user "
            "could swap it; work from a folder only you (or root) can write, e.g. one in "
            "your home or your own scratch folder"
        )
    path = parent / name
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UserError(f"{path}: cannot create: {exc.strerror or exc}") from None
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
        raise UserError(
            f"{path}: is {kind}; the tool keeps {purpose} in a folder of its own: remove it"
        )
    if info.st_uid != os.geteuid():
        raise UserError(f"{path}: belongs to another user (uid {info.st_uid}); remove it")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        # left so by an older version, or by hand: another user may have written into it
        raise UserError(
            f"{path}: is writable by others (mode {stat.S_IMODE(info.st_mode):04o}), so what "
            f"is in it may not be yours: remove it (rm -r {path}); the tool makes it again, 0700"
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def private_folder_refusal(path: Path) -> str | None:
    """Why `path` is not a folder of the user's own that nobody else can write (it or the
    folder it is in), or None; a link is refused, not followed."""
    for node in (path.parent, path):
        try:
            info = os.lstat(node)
        except OSError as exc:
            return f"{node}: {exc.strerror or exc}"
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            return (
                f"{node}: is {'a symbolic link' if stat.S_ISLNK(info.st_mode) else 'not a folder'}"
            )
        if info.st_uid != os.geteuid():
            return f"{node}: belongs to another user (uid {info.st_uid})"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{node}: is writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def write_new_private(path: Path, text: str) -> None:
    """A new file, owner-only: never one that exists, never through a link (O_EXCL|O_NOFOLLOW)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise UserError(f"{path}: already exists; the tool writes only new files there") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
