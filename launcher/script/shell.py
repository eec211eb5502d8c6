"""Shell words for what the launcher shows and writes: dry-run lines and batch scripts (bash).

shlex.quote keeps control characters raw inside single quotes: an escape sequence or a carriage
return would act on the terminal of whoever reads a dry run (and click's echo strips escape
sequences, so the line shown would not be the line run). Words with such characters are
written in bash's $'...' form instead, which says exactly the same word in plain text. In a
line shown to a person newline and tab stay as they are (inside quotes they are the shell's,
and the launcher's own wrapper scripts stay readable); in a batch script (one_line) they are
escaped too, so that each command is one line of the file and no argument can put a line that
looks like `#SBATCH` into it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from hvd_container.core.text import TERMINAL_CONTROLS

_CONTROL = re.compile(f"[{TERMINAL_CONTROLS}]")


def _escape(char: str) -> str:
    """The character's bytes as \\xHH: bash's \\u escapes depend on the locale, bytes do not."""
    data = char.encode(
        "utf-8", "surrogateescape" if "\udc80" <= char <= "\udcff" else "surrogatepass"
    )
    return "".join(f"\\x{b:02x}" for b in data)


_LINE = re.compile("[\n\t]")


def quote(word: str, *, one_line: bool = False) -> str:
    """word as one shell word: shlex.quote, or $'...' when it holds control characters (with
    one_line, newlines and tabs too)."""
    if not _CONTROL.search(word) and not (one_line and _LINE.search(word)):
        return shlex.quote(word)
    body = word.replace("\\", "\\\\").replace("'", "\\'")
    escaped = _CONTROL.sub(lambda m: _escape(m[0]), body)
    if one_line:
        escaped = _LINE.sub(lambda m: _escape(m[0]), escaped)
    return "$'" + escaped + "'"


def join(words: Iterable[str], *, one_line: bool = False) -> str:
    return " ".join(quote(w, one_line=one_line) for w in words)
