"""bench/emulation.py builds each twin under a name of its own (never the tag the tests use),
with the twin's own lock and architecture."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from _bench_scripts import load_bench
from hvd_container.containers.recipe_loader import builtin_path, load_recipe


@pytest.fixture
def bench() -> ModuleType:
    return load_bench("emulation.py")


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
