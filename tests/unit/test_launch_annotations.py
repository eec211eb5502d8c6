"""Type hints throughout the launch side: every function's parameters and return are
annotated (what ruff's ANN rules ask), with no `type: ignore[no-untyped-def]` to hide one.
Not the programs handed to the image's Python (launcher/programs/): 3.8 there would evaluate
an annotation such as list[str] and fail."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    [
        *(p for p in (ROOT / "launcher").rglob("*.py") if "programs" not in p.parts),
        *(
            ROOT / "hvd_container" / "cli" / "commands" / f"{name}.py"
            for name in ("run", "jobs", "jupyter", "sites")
        ),
    ]
)


def missing_annotations(source: str) -> list[str]:
    """`name:line: what` for each function parameter or return without a type."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        params += [a for a in (args.vararg, args.kwarg) if a is not None]
        for i, arg in enumerate(params):
            if i == 0 and arg.arg in ("self", "cls"):
                continue
            if arg.annotation is None:
                problems.append(f"{node.name}:{node.lineno}: parameter {arg.arg}")
        if node.returns is None and node.name != "__init__":
            problems.append(f"{node.name}:{node.lineno}: return")
    for number, line in enumerate(source.splitlines(), 1):
        if "type: ignore[no-untyped-def]" in line:
            problems.append(f"line {number}: type: ignore[no-untyped-def]")
    return problems


def test_the_check_finds_what_it_should() -> None:
    assert missing_annotations(
        "def f(site, n: int):  # type: ignore[no-untyped-def]\n    pass\n"
    ) == [
        "f:1: parameter site",
        "f:1: return",
        "line 1: type: ignore[no-untyped-def]",
    ]
    assert missing_annotations("class A:\n    def m(self, x: int) -> None: ...\n") == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_function_is_annotated(path: Path) -> None:
    assert missing_annotations(path.read_text()) == []
