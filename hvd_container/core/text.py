"""What text from others may not hold where it is written on one line."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

# C0 and C1 controls, DEL, U+2028/U+2029: what a shell, Docker, Apptainer's scanner or a later
# step that normalises text may read as the end of a line, or a terminal acts on
_LINE_ENDS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

LINE_ENDS_ALLOWED = "control characters and line breaks (newline, carriage return, tab, U+2028, ...) are not allowed"


# What a terminal acts on or cannot print, newline and tab aside (a character class body):
# C0/C1 controls (ESC, CR, BEL, ...), DEL, line and paragraph separators, bidirectional
# overrides, and surrogates (lone ones, or the bytes of a non-UTF-8 argument that Python's
# surrogateescape keeps)
TERMINAL_CONTROLS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
)


def has_line_ends(value: str) -> bool:
    """True when value holds a control character or a line break of any kind."""
    return _LINE_ENDS.search(value) is not None


def is_utf8(value: str) -> bool:
    """False for a str that holds the bytes of a non-UTF-8 argument (surrogateescape keeps
    them as lone surrogates): it cannot be written as text without changing it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def ascii_digits(value: str) -> bool:
    """0-9 only: str.isdigit() also takes ², ³ and other digits that int() refuses or reads
    as another number, and a program would receive them as they are."""
    return value.isascii() and value.isdigit()


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """', did you mean X?' for the allowed value nearest a misspelt one (difflib's ratio of at
    least 0.75: perlmuter -> perlmutter, verison -> version), else ''."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f", did you mean {found[0]!r}?" if found else ""
