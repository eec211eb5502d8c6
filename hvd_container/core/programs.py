"""Programs the tool hands to `python -c` or `sh -c` (smoke payloads, helpers that run on the
nodes or in the image), kept as files of the package, `programs/` beside the code that runs
them, so that ruff and shellcheck lint them (`make lint`). The text handed over is the file
without its header comment (what it is and how it is called, for the reader)."""

from __future__ import annotations

from importlib import resources


def program_text(package: str, name: str, *, one_line: bool = False) -> str:
    """The program `programs/NAME` of `package`, less its leading comment lines.

    one_line: a sh helper that goes into srun lines and batch scripts as one line: its lines,
    each of which ends where sh lets a space follow (`;`, `then`, `do`, `else`), are joined
    with a space (tests/unit/test_programs.py parses the result with sh -n)."""
    text = (resources.files(package) / "programs" / name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    body = lines[start:]
    if one_line:
        return " ".join(line.strip() for line in body if line.strip())
    return "".join(body)
