"""The launch benchmarks find the SIF that the README's own commands made: `make demo`
converts in out/demo/, `make sif` in out/."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import ModuleType

import pytest
from _bench_scripts import load_bench

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def cluster() -> ModuleType:
    return load_bench("_cluster.py")


def test_the_first_place_is_where_make_demo_converts(cluster: ModuleType) -> None:
    demo = (ROOT / "testbed" / "demo.sh").read_text()
    assert "OUT=${OUT:-out}" in demo and re.search(r'cd "\$OUT/demo"\n(.*\n)*.*convert ', demo)
    assert cluster.DEFAULT_IMAGES[0] == ROOT / "out" / "demo" / "cpu-bookworm_1.sif"


def test_the_newest_of_the_two_is_taken(
    cluster: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo, sif = tmp_path / "demo.sif", tmp_path / "sif.sif"
    monkeypatch.setattr(cluster, "DEFAULT_IMAGES", (demo, sif))
    assert cluster.default_image() == str(demo)  # none yet: the first place, named in the error
    sif.write_bytes(b"x")
    assert cluster.default_image() == str(sif)
    demo.write_bytes(b"x")
    os.utime(sif, (1, 1))
    assert cluster.default_image() == str(demo)


def test_a_missing_image_is_one_line_naming_the_commands(
    cluster: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        cluster.image_or_exit(str(tmp_path / "none.sif"), "bench/launch.py")
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert "`make demo` or `make sif` makes out/demo/cpu-bookworm_1.sif" in err
