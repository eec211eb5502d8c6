"""The tar2sqfs command line of the native SIF path, and bench/convert.py's bare step using it.

(Its effect on a real squashfs, files keeping their mtimes, is checked end to end in
tests/e2e/test_convert_sif.py and test_convert_cpu.py.)"""

from __future__ import annotations

import importlib.util
import io
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hvd_container.containers.sif.writer import tar2sqfs_argv

BENCH = Path(__file__).resolve().parents[4] / "bench" / "convert.py"


def test_tar2sqfs_keeps_each_files_mtime() -> None:
    argv = tar2sqfs_argv("/dev/fd/7", compression="zstd", threads=3, mtime=1_700_000_000)
    assert argv == [
        "tar2sqfs", "--quiet", "--force", "--no-skip", "--compressor", "zstd",
        "--comp-extra", "level=3", "--num-jobs", "3", "--defaults", "mtime=1700000000",
        "/dev/fd/7",
    ]  # fmt: skip
    # squashfs-tools-ng >= 0.7: -k is --no-keep-time (every file would get mtime=...).
    assert "-k" not in argv and "--no-keep-time" not in argv


@pytest.mark.parametrize(
    ("compression", "extra"),
    [("gzip", ["--comp-extra", "level=6"]), ("zstd", ["--comp-extra", "level=3"]), ("xz", [])],
)
def test_gzip_and_zstd_write_at_their_librarys_own_level_not_tar2sqfss(
    compression: str, extra: list[str]
) -> None:
    # tar2sqfs's own gzip 9 and zstd 15 took 3 and 16 times as long on the CPU recipe's root
    # filesystem for a SIF 0.5% and 2.6% smaller (bench/convert.py --levels)
    argv = tar2sqfs_argv("out.sqfs", compression=compression, threads=2, mtime=0)
    at = argv.index("--compressor")
    assert argv[at : at + 2 + len(extra)] == ["--compressor", compression, *extra]
    assert "level=9" not in argv and "level=15" not in argv


def test_the_benchmark_can_ask_for_tar2sqfss_own_level() -> None:
    argv = tar2sqfs_argv("out.sqfs", compression="gzip", threads=2, mtime=0, level=9)
    assert argv.count("--comp-extra") == 1 and "level=9" in argv


class FakeDockerCli:
    """FAKE subprocess module for bench/convert.py: records command lines instead of running
    the docker CLI and tar2sqfs (no engine is reachable in unit tests)."""

    PIPE = subprocess.PIPE
    DEVNULL = subprocess.DEVNULL

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], **_kw: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, stdout="cid0\n")

    def Popen(self, argv: list[str], **_kw: Any) -> Any:  # noqa: N802 (subprocess's name)
        self.calls.append(list(argv))
        export = subprocess.CompletedProcess(argv, 0)
        export.stdout = io.BytesIO()  # type: ignore[assignment]
        export.wait = lambda: 0  # type: ignore[attr-defined]
        return export


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, FakeDockerCli]:
    spec = importlib.util.spec_from_file_location("bench_convert", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fake = FakeDockerCli()
    monkeypatch.setattr(module, "subprocess", fake)
    return module, fake


def test_bench_bare_step_uses_the_native_command_line(
    bench: tuple[ModuleType, FakeDockerCli], tmp_path: Path
) -> None:
    module, fake = bench
    out = tmp_path / "bare.sqfs"
    module.bare("img:1", out, "xz", 5, mtime=1_650_000_000)
    squash = [argv for argv in fake.calls if argv[0] == "tar2sqfs"]
    assert squash == [tar2sqfs_argv(str(out), compression="xz", threads=5, mtime=1_650_000_000)]
    assert [argv[1] for argv in fake.calls if argv[0] != "tar2sqfs"] == ["create", "export", "rm"]


def test_bench_levels_compares_tar2sqfss_level_with_ours_for_each_compressor(
    bench: tuple[ModuleType, FakeDockerCli], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module, fake = bench
    # the fake runs no tar2sqfs: each bare step finds an output of a size of its own
    sizes = iter([1000, 1005, 900, 920])
    real_bare = module.bare

    def bare(image: str, out: Path, *args: Any, **kw: Any) -> float:
        seconds = real_bare(image, out, *args, **kw)
        out.write_bytes(b"x" * next(sizes))
        return seconds

    module.bare = bare
    module.compare_levels("img:1", tmp_path, 2)
    levels = [a[a.index("--comp-extra") + 1] for a in fake.calls if a[0] == "tar2sqfs"]
    assert levels == ["level=9", "level=6", "level=15", "level=3"]
    said = capsys.readouterr().out
    assert "gzip 6 vs 9" in said and "size ratio 1.005" in said
    assert "zstd 3 vs 15" in said and "size ratio 1.022" in said
    assert not list(tmp_path.iterdir())
