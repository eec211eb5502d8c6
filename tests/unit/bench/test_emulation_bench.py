"""bench/emulation.py builds each twin under a name of its own (never the tag the tests use),
with the twin's own lock and architecture."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from hvd_container.containers.recipe_loader import builtin_path, load_recipe

BENCH = Path(__file__).resolve().parents[3] / "bench" / "emulation.py"


@pytest.fixture
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_emulation", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_each_twin_is_built_under_a_bench_name_with_its_own_lock_and_arch(
    bench: ModuleType, tmp_path: Path, arch: str
) -> None:
    recipe = bench.TWINS[arch]
    path, tag = bench.bench_recipe(recipe, arch, tmp_path)
    built = load_recipe(path)
    assert tag == f"hvd-bench-emulation-{arch}:1" == built.image_tag
    measured = load_recipe(builtin_path(recipe))
    assert built.arch == measured.arch == arch
    assert built.lock == measured.lock and built.pytorch == measured.pytorch
