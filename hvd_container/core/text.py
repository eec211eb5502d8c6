"""What text from others may not hold where it is written on one line."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, U+2028/U+2029: what a shell, Docker, Apptainer's scanner or a later
# step that normalises text may read as the end of a line, or a terminal acts on
_LINE_ENDS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

LINE_ENDS_ALLOWED = "control characters and line breaks (newline, carriage return, tab, U+2028, ...) are not allowed"


def has_line_ends(value: str) -> bool:
    """True when value holds a control character or a line break of any kind."""
    return _LINE_ENDS.search(value) is not None
