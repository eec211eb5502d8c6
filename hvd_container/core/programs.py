"""Programs the tool hands to `python -c` or `sh -c` (smoke payloads, helpers that run on the
nodes or in the image), kept as files of the package, `programs/` beside the code that runs
them, so that ruff and shellcheck lint them (`make lint`). The text handed over is the file
without its header comment (what it is and how it is called, for the reader)."""

from __future__ import annotations

from importlib import resources

# every text handed out -> its file's name: a batch script writes each helper once, as it is,
# and names it in its srun line
_HANDED: dict[str, str] = {}


def program_text(package: str, name: str) -> str:
    """The program `programs/NAME` of `package`, less its leading comment lines."""
    text = (resources.files(package) / "programs" / name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    handed = "".join(lines[start:])
    _HANDED[handed] = name
    return handed


def handed_program(text: str) -> str | None:
    """The file name of the program whose handed-out text is `text`, or None for any other."""
    return _HANDED.get(text)
