"""`hvd-container lock` resolving for real: uv against PyPI and this machine's pip configuration
(indexes, wheelhouse), the recipes copied away so that the shipped files stay as they are."""

from __future__ import annotations

import concurrent.futures
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._json_records import result

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def lock(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hvd_container", "lock", *args], capture_output=True, text=True
    )


@pytest.mark.parametrize("name", ["cpu-bookworm", "cpu-bookworm-tf-pt"])
def test_a_cpu_recipe_locks_with_hashes_and_checks_clean(name: str, tmp_path: Path) -> None:
    recipe = tmp_path / f"{name}.yaml"
    shutil.copy(ROOT / "recipes" / f"{name}.yaml", recipe)
    done = lock(str(recipe), "--json")
    assert done.returncode == 0, done.stderr
    record = result("lock", done.stdout)
    packages = record["packages"]
    assert packages["horovod"] == "0.28.1" and record["written"]
    text = (tmp_path / f"{name}.lock").read_text()
    entries = [line for line in text.splitlines() if "==" in line and not line.startswith("#")]
    assert len(entries) == len(packages)
    assert "    # via horovod" in text  # the chains: what pulls each dependency in
    assert text.count("--hash=sha256:") >= len(packages)  # every package hashed
    if name == "cpu-bookworm":
        assert packages["torch"] == "2.13.0+cpu"
    else:  # TensorFlow 2.15 is built against NumPy 1: the lock keeps numpy below 2
        assert packages["tensorflow-cpu"] == "2.15.1" and packages["numpy"].startswith("1.")
        assert packages["torch"] == "2.13.0+cpu"  # both frameworks in one image
    again = lock(str(recipe), "--check")
    assert again.returncode == 0 and "is up to date" in again.stdout, again.stdout + again.stderr


def test_numpy_2_with_tensorflow_215_is_refused_with_the_chain(tmp_path: Path) -> None:
    recipe = tmp_path / "tf-numpy2.yaml"
    shutil.copy(ROOT / "recipes" / "cpu-bookworm-tf-pt.yaml", tmp_path / "base.yaml")
    recipe.write_text("extends: base.yaml\nname: tf-numpy2\npip: [numpy>=2]\n")
    done = lock(str(recipe))
    # tensorflow-cpu 2.15.1 requires numpy<2: the resolver says so, or the rule does
    assert done.returncode != 0
    assert "numpy" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "tf-numpy2.lock").exists()


def _shipped() -> list[str]:
    """NAME of each NAME.lock, NAME.ARCH of each lock of one architecture's image."""
    return sorted(p.stem for p in (ROOT / "recipes").glob("*.lock"))


def test_every_shipped_recipe_ships_a_lock() -> None:
    recipes = sorted(p.stem for p in (ROOT / "recipes").glob("*.yaml"))
    assert sorted({stem.split(".")[0] for stem in _shipped()}) == recipes


def _resolve_again(stem: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """uv resolving the recipe's inputs with the lock's own versions as constraints: every
    locked file must still be on the indexes reachable here and the set must still be
    consistent (new releases of what the lock pins do not make this fail; `lock --check` shows
    those)."""
    from hvd_container.containers.lock import compile_argv, lock_inputs, uv_command
    from hvd_container.containers.lockfile import parse_lock
    from hvd_container.containers.pipconfig import read_host_pip_config
    from hvd_container.containers.recipe_loader import load_recipe

    name, _, arch = stem.partition(".")
    recipe = load_recipe(name, arch or None)
    assert recipe.lock is not None
    constraints = folder / f"{stem}.constraints.txt"
    locked = parse_lock(recipe.lock).values()
    constraints.write_text("".join(f"{p.name}=={p.version}\n" for p in locked))
    inputs = lock_inputs(recipe, read_host_pip_config())
    return subprocess.run(
        [*compile_argv(inputs, uv_command()), "--constraint", str(constraints)],
        input="\n".join(inputs.requirements) + "\n", capture_output=True, text=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every shipped lock resolved again, side by side (each waits on the indexes, not on
    this machine: one after the other they took 110 s of a CI run, nine at a time about 40)."""
    folder = tmp_path_factory.mktemp("resolve")
    stems = _shipped()
    with concurrent.futures.ThreadPoolExecutor(max_workers=9) as pool:
        futures = {stem: pool.submit(_resolve_again, stem, folder) for stem in stems}
    out: dict[str, Any] = {}
    for stem, future in futures.items():
        try:
            out[stem] = future.result()
        except Exception as exc:  # said by the stem's own test, not by the fixture  # noqa: BLE001
            out[stem] = exc
    return out


@pytest.mark.parametrize("stem", _shipped())
def test_each_shipped_lock_resolves_again_here(stem: str, resolved: dict[str, Any]) -> None:
    from hvd_container.containers.lockfile import parse_lock
    from hvd_container.containers.recipe_loader import load_recipe

    name, _, arch = stem.partition(".")
    recipe = load_recipe(name, arch or None)  # a stale lock would be refused here
    assert recipe.lock is not None
    locked = parse_lock(recipe.lock)
    done = resolved[stem]
    if isinstance(done, Exception):
        raise done
    assert done.returncode == 0, done.stderr
    again = parse_lock(done.stdout)
    assert {n: p.version for n, p in again.items()} == {n: p.version for n, p in locked.items()}
    if recipe.lightning is not None:  # pip used to replace the pinned torch through torchmetrics
        assert locked["torch"].version == recipe.pytorch.version  # type: ignore[union-attr]
    from packaging.version import Version

    numpy1 = [  # frameworks the lock installs that are built against NumPy 1
        f
        for f, first in ((recipe.pytorch, "2.3"), (recipe.tensorflow, "2.16"))
        if f is not None and f.source == "pip" and Version(f.version) < Version(first)
    ]
    if numpy1:
        assert Version(locked["numpy"].version) < Version("2"), name
