"""Shell words for what the launcher shows and writes: dry-run lines and batch scripts (bash).

shlex.quote keeps control characters raw inside single quotes: an escape sequence or a carriage
return would act on the terminal of whoever reads a dry run (and click's echo strips escape
sequences, so the line shown would not be the line run). Words with such characters are
written in bash's $'...' form instead, which says exactly the same word in plain text. Newline
and tab stay as they are: inside quotes they are the shell's, and the launcher's own wrapper
scripts stay readable.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

# controls, line and paragraph separators, bidi overrides, and surrogates (the bytes of an
# argument that was not UTF-8, as Python's surrogateescape keeps them)
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escape(char: str) -> str:
    """The character's bytes as \\xHH: bash's \\u escapes depend on the locale, bytes do not."""
    data = char.encode(
        "utf-8", "surrogateescape" if "\udc80" <= char <= "\udcff" else "surrogatepass"
    )
    return "".join(f"\\x{b:02x}" for b in data)


def quote(word: str) -> str:
    """word as one shell word: shlex.quote, or $'...' when it holds control characters."""
    if not _CONTROL.search(word):
        return shlex.quote(word)
    body = word.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _CONTROL.sub(lambda m: _escape(m[0]), body) + "'"


def join(words: Iterable[str]) -> str:
    return " ".join(quote(w) for w in words)
