from __future__ import annotations

from pathlib import Path

import pytest

from hvd_container.core.atomic import atomic_output, write_text


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
