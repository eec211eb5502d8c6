"""bench/engines.py builds under a name of its own and removes what it built: its cold builds
must neither replace the image the tests use nor leave a second chain of its first layers."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _bench_scripts import load_bench
from hvd_container.containers.recipe_loader import builtin_path, load_recipe


@pytest.fixture
def bench() -> ModuleType:
    return load_bench("engines.py")


def test_the_bench_recipe_extends_the_one_measured_under_its_own_name(
    bench: ModuleType, tmp_path: Path
) -> None:
    path = bench.bench_recipe("cpu-bookworm-torch", tmp_path)
    locked = load_recipe(path)  # the lock beside it is the measured recipe's, and fits
    assert locked.name == bench.BENCH_NAME and locked.image_tag == f"{bench.BENCH_NAME}:1"
    measured = load_recipe(builtin_path("cpu-bookworm-torch"))
    assert locked.pytorch == measured.pytorch and locked.lock == measured.lock


def test_each_build_is_removed_after_it_even_a_failed_one(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran: list[list[str]] = []

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        failed = argv[0] == "su" and " build " in argv[-1]  # podman's build fails
        return subprocess.CompletedProcess(argv, 1 if failed else 0, "", "no space left")

    monkeypatch.setattr(bench.subprocess, "run", run)
    monkeypatch.setattr(bench, "VENV", tmp_path)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "hvd-container").touch()
    monkeypatch.setattr("sys.argv", ["engines.py", "cpu-bookworm-torch"])
    with pytest.raises(SystemExit, match="build failed"):
        bench.main()
    tag = f"{bench.BENCH_NAME}:1"
    assert ran[1] == ["docker", "rmi", tag]  # after Docker's build
    assert ran[3] == ["su", "-", bench.USER, "-c", f"podman rmi {tag}"]  # after podman's
    built = [a for a in ran if "build" in a or "build" in a[-1]]
    assert all("cpu-bookworm-torch" not in " ".join(a).split("build", 1)[1] for a in built)
