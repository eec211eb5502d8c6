from __future__ import annotations

import os
from pathlib import Path

import pytest

from hvd_container.core.atomic import atomic_output, output_file, write_output, write_text
from hvd_container.core.errors import UserError
from hvd_container.core.files import special_kind


def test_write_text_replaces_target(tmp_path: Path) -> None:
    target = tmp_path / "job.sh"
    target.write_text("old")
    write_text(target, "new\n", mode=0o755)
    assert target.read_text() == "new\n"
    assert target.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.sh"]


def test_interrupted_write_leaves_old_target_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "image.sif"
    target.write_bytes(b"previous")
    with pytest.raises(KeyboardInterrupt), atomic_output(target) as fh:
        fh.write(b"partial")
        raise KeyboardInterrupt
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["image.sif"]


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("folder", "is a directory, expected a file path"),
        ("missing/x.txt", "directory missing does not exist"),
    ],
)
def test_an_output_file_it_cannot_write_is_refused_before_any_work(
    target: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    with pytest.raises(UserError, match=f"^--out {target}: {problem}$"):
        output_file(target, "--out")
    with pytest.raises(UserError, match=f"^--out {target}: {problem}$"):
        write_output(target, "--out", "x\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


def test_a_write_that_fails_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    """Writing into /proc fails where the check could not tell: the OSError becomes the line."""
    with pytest.raises(
        UserError, match=r"^--out /proc/x\.txt: cannot write: No such file or directory$"
    ):
        write_output("/proc/x.txt", "--out", "x\n")
    write_output(tmp_path / "x.txt", "--out", "x\n", 0o600)
    assert (tmp_path / "x.txt").read_text() == "x\n"
    assert (tmp_path / "x.txt").stat().st_mode & 0o777 == 0o600


def test_a_file_that_is_not_regular_is_never_replaced(tmp_path: Path) -> None:
    """As root a rename onto /dev/null replaces the device: atomic_output refuses it itself,
    whoever calls it (asked with lstat: /dev/null is neither opened nor touched here)."""
    assert special_kind("/dev/null") == "a character device"
    assert special_kind(tmp_path) == "a directory"
    assert special_kind(tmp_path / "none") is None
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UserError, match=r"fifo: is a named pipe; only a regular file is replaced$"):
        write_text(tmp_path / "fifo", "x\n")
    assert special_kind(tmp_path / "fifo") == "a named pipe"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]  # no temporary file left
