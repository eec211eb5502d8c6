"""`hvd-container lock` resolving for real: uv against PyPI and this machine's pip configuration
(indexes, wheelhouse), the recipes copied away so that the shipped files stay as they are."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._json_records import result

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def lock(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hvd_container", "lock", *args], capture_output=True, text=True
    )


@pytest.mark.parametrize("name", ["cpu-bookworm", "cpu-bookworm-tf"])
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
    again = lock(str(recipe), "--check")
    assert again.returncode == 0 and "is up to date" in again.stdout, again.stdout + again.stderr


def test_numpy_2_with_tensorflow_215_is_refused_with_the_chain(tmp_path: Path) -> None:
    recipe = tmp_path / "tf-numpy2.yaml"
    shutil.copy(ROOT / "recipes" / "cpu-bookworm-tf.yaml", tmp_path / "base.yaml")
    recipe.write_text("extends: base.yaml\nname: tf-numpy2\npip: [numpy>=2]\n")
    done = lock(str(recipe))
    # tensorflow-cpu 2.15.1 requires numpy<2: the resolver says so, or the rule does
    assert done.returncode != 0
    assert "numpy" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "tf-numpy2.lock").exists()
