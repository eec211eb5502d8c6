"""Bind mounts, SRC[:DST[:ro|rw]]: one reader for site profiles, --bind and the runtimes."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import NamedTuple

OPTIONS = ("ro", "rw")


class Bind(NamedTuple):
    source: str
    dest: str
    option: str | None  # ro, rw or None (the runtime's default)

    def __str__(self) -> str:
        return ":".join([self.source, self.dest, *([self.option] if self.option else [])])


def split_binds(text: str) -> list[str]:
    """`-B a,b` is two binds to every runtime that takes lists (Apptainer, Singularity): each
    is read and checked on its own."""
    return text.split(",")


def parse_bind(text: str, *, allow_unexpanded: bool = False) -> Bind | str:
    """The bind, or why text is not one. Paths are absolute; a site profile may start SRC with
    `~` or `$VAR`, which the job's shell expands (allow_unexpanded)."""
    parts = text.split(":")
    starts = ("/", "~", "$") if allow_unexpanded else ("/",)
    if not text or not parts[0].startswith(starts) or len(parts) > 3:
        return f"{text!r} is not SRC[:DST[:ro|rw]] with absolute paths"
    if len(parts) == 3 and parts[2] not in OPTIONS:
        return f"{text!r}: the option must be ro or rw"
    dest = parts[1] if len(parts) > 1 else parts[0]
    if not dest.startswith(starts):
        return f"{text!r}: the destination must be an absolute path"
    return Bind(parts[0], dest, parts[2] if len(parts) == 3 else None)


_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def expand(text: str, env: Mapping[str, str]) -> str:
    """A profile's bind as the launching user's shell would read it: a leading `~` is their
    home, `$VAR`/`${VAR}` their variable's value. Raises ValueError naming an unset variable
    (a value that is not a plain absolute path is refused by parse_bind after this)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        found = env.get(name)
        if not found:
            raise ValueError(f"{text!r}: ${name} is not set in your environment")
        if any(c in found for c in ":,\n"):
            raise ValueError(
                f"{text!r}: ${name} holds ':', ',' or a line break, which a bind cannot"
            )
        return found

    parts = []
    for part in text.split(":"):
        if part == "~" or part.startswith("~/"):
            home = env.get("HOME") or os.path.expanduser("~")
            part = home + part[1:]
        parts.append(_VARIABLE.sub(value, part))
    return ":".join(parts)


def source_of(text: str) -> str:
    """SRC of a bind already checked."""
    return text.split(":", 1)[0]


def dest_of(text: str) -> str:
    """DST of a bind already checked (SRC when it has none)."""
    parts = text.split(":")
    return parts[1] if len(parts) > 1 else parts[0]
