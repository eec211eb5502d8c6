"""Hostile YAML: every case ends within 2 s with one line and exit 2, through the real CLI in a
fresh interpreter (a crash or a hang would otherwise take the test run with it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hvd_container.core import yamlconf

LAUGHS = "a0: &a0 [lol]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)
)


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _big(path: Path) -> Path:
    with path.open("wb") as fh:
        fh.truncate(30 << 20)  # 30 MB of zeros, sparse
    return path


CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "billion laughs": (lambda d: _write(d / "r.yaml", "name: x\n" + LAUGHS), "once its aliases are expanded"),
    "recursive alias": (lambda d: _write(d / "r.yaml", "name: x\nenv: &e\n  A: *e\n"), "an alias to its own ancestor"),
    "deep flow nesting": (lambda d: _write(d / "r.yaml", "x: " + "[" * 20000 + "]" * 20000 + "\n"), "nested more than 64 levels"),
    "deep block nesting": (lambda d: _write(d / "r.yaml", "".join(f"{'  ' * i}k{i}:\n" for i in range(700))), "nested more than 64 levels"),
    "30 MB file": (lambda d: _big(d / "r.yaml"), "more than a recipe or site profile has"),
    "extends a FIFO": (lambda d: _write(d / "r.yaml", f"extends: {_fifo(d / 'p.yaml')}\nname: x\n"), "is a named pipe"),
    "extends a device": (lambda d: _write(d / "r.yaml", "extends: /dev/zero\nname: x\n"), "is a character device"),
    "extends a directory": (lambda d: _write(d / "r.yaml", f"extends: {d}\nname: x\n"), "is a directory"),
}  # fmt: skip


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_yaml_is_one_line_at_once(tmp_path: Path, name: str) -> None:
    """The limits stop each case while it is read (a billion laughs unguarded runs for minutes
    and gigabytes): one line, well within the bound, which leaves room for a loaded machine
    (a process start and the CLI's imports are most of it)."""
    make, expected = CASES[name]
    recipe = make(tmp_path)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "hvd_container", "recipes", "validate", str(recipe)],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert expected in done.stderr
    assert elapsed < 10, f"{name}: {elapsed:.1f} s"


def test_the_site_loader_has_the_same_limits(tmp_path: Path) -> None:
    profile = _write(tmp_path / "mine.yaml", "name: mine\n" + LAUGHS)
    done = subprocess.run(
        [sys.executable, "-m", "hvd_container", "sites", "show", str(profile)],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert done.returncode == 2 and "once its aliases are expanded" in done.stderr


def test_limits_leave_ordinary_anchors_alone(tmp_path: Path) -> None:
    doc = yamlconf.parse("base: &b {a: 1}\nother:\n  <<: *b\n  c: 2\n", "t.yaml")
    assert doc.data["other"] == {"a": 1, "c": 2}


def test_a_nesting_just_within_the_limit_parses() -> None:
    depth = yamlconf.MAX_DEPTH - 1
    doc = yamlconf.parse("x: " + "[" * depth + "]" * depth + "\n", "t.yaml")
    assert "x" in doc.data
