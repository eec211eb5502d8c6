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


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[-_.]", name.lower()) if w]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """', did you mean X?' for the allowed value a mistyped one stands for, else ''.

    In order: the one allowed name of several words that has the typed word's first word
    among its own (daint -> cscs-daint, juwels -> juwels-booster, jupiter-booster ->
    jupiter); the one the typed word begins with (enviroment -> env); the nearest by
    difflib's ratio of at least 0.75, two where two are as near (perlmuter -> perlmutter,
    amd_a100_8 -> amd_a100nv_8 or amd_a100_4)."""
    allowed = list(dict.fromkeys(choices))
    typed = _words(word)
    if typed and allowed:
        by_word = [c for c in allowed if c != word and typed[0] in _words(c)]
        if len(by_word) == 1:
            return f", did you mean {by_word[0]!r}?"
        begins = [c for c in allowed if len(c) >= 3 and word.lower().startswith(c.lower())]
        if len(begins) == 1 and begins[0] != word:
            return f", did you mean {begins[0]!r}?"
    found = difflib.get_close_matches(word, allowed, n=2, cutoff=0.75)
    if len(found) == 2:
        ratio = [difflib.SequenceMatcher(None, word, f).ratio() for f in found]
        if ratio[0] - ratio[1] < 0.05:
            return f", did you mean {found[0]!r} or {found[1]!r}?"
    return f", did you mean {found[0]!r}?" if found else ""
