"""The programs handed to `python -c` and `sh -c` (hvd_container/core/programs.py): files of
the package that ruff and shellcheck lint (`make lint`), each one loaded by the code, each
one parsed here as its interpreter reads the text it is handed."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from hvd_container.core.programs import program_text

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = {"launcher": "hvd_container.launcher", "containers": "hvd_container.containers"}
PROGRAMS = sorted(p for folder in PACKAGES for p in (ROOT / folder / "programs").iterdir())
SOURCES = [
    p for folder in PACKAGES for p in (ROOT / folder).rglob("*.py") if "programs" not in p.parts
]


def handed_over(path: Path) -> tuple[str, str]:
    """(how the code loads it, the text it hands over), from the code's own call."""
    package = PACKAGES[path.parent.parent.name]
    calls = [
        line.strip()
        for source in SOURCES
        for line in source.read_text().splitlines()
        if f'program_text("{package}", "{path.name}"' in line
    ]
    assert calls, f"{path.relative_to(ROOT)}: no program_text call loads it"
    return calls[0], program_text(package, path.name)


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_each_program_is_loaded_and_parses_as_handed_over(path: Path) -> None:
    call, text = handed_over(path)
    assert text and not text.startswith("#"), "the header comment is the reader's, not -c's"
    if path.suffix == ".py":
        # the image's Python runs it: 3.8 on NGC 22.03 images
        ast.parse(text, path.name, feature_version=(3, 8))
    else:
        parsed = subprocess.run(["sh", "-n", "-c", text], capture_output=True, text=True)
        assert parsed.returncode == 0, parsed.stderr
