"""One printer per output format, each writing instruction records (containers/instructions.py)
as native text and refusing what it cannot write faithfully."""

from __future__ import annotations

from hvd_container.core.errors import UserError

# What ends a line for Docker, a shell or a later step that normalises text: none of these may
# appear inside a value written on one line.
LINE_BREAKS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def one_line(value: str, what: str) -> str:
    """value, refused when a line break in it would end its instruction or section line."""
    if any(brk in value for brk in LINE_BREAKS):
        raise UserError(f"{what}: {value!r} has a line break; it cannot be written on one line")
    return value


def shell_command(value: str, what: str) -> str:
    """A one-line shell command that stays inside its RUN / %post line: no trailing backslash
    (Docker would join the next instruction to it) and no `<<` (BuildKit reads a here-document
    there, and it would swallow the lines after it)."""
    one_line(value, what)
    if value.rstrip().endswith("\\"):
        raise UserError(f"{what}: {value!r} ends with a backslash, which would join the next line")
    if "<<" in value:
        raise UserError(f"{what}: {value!r} has `<<`, which BuildKit reads as a here-document")
    return value
