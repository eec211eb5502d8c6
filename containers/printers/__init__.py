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


def shell_command_problem(value: str) -> str | None:
    """Why a one-line shell command would not stay inside its RUN / %post line, or None: a
    trailing backslash (Docker joins the next instruction to it) or `<<` (BuildKit reads a
    here-document there, which swallows the lines after it). The recipe model refuses the same
    with the file and line; the printers refuse it again whatever the records' origin."""
    if value.rstrip().endswith("\\"):
        return "ends with a backslash, which would join the next line"
    if "<<" in value:
        return "has `<<`, which BuildKit reads as a here-document"
    return None


def section_header_problem(line: str) -> str | None:
    """Why a line inside a definition-file section would start a section of its own, or None:
    Apptainer takes any line whose first word starts with % as a section header (leading
    blanks do not protect it, and %setup runs on the build host)."""
    words = line.split()
    if words and words[0].startswith("%"):
        return "may not start with %: the definition file would read a section header"
    return None


def shell_command(value: str, what: str) -> str:
    """value, refused when it would not stay on its one RUN / %post line."""
    one_line(value, what)
    problem = shell_command_problem(value)
    if problem:
        raise UserError(f"{what}: {value!r} {problem}")
    return value
