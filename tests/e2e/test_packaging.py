"""The wheel on its own: built from the sources, installed away from them, every command works.

Built-in recipes and site profiles must ship inside the wheel; a plain `pip install` is how
users get the tool onto a login node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"


def _names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml"))


@pytest.mark.e2e
def test_the_wheel_works_outside_the_source_tree(tmp_path: Path) -> None:
    # a copy, so that setuptools' build/ folder is not left in the checkout
    src = tmp_path / "src"
    shutil.copytree(
        ROOT, src,
        ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".*cache", "tests"),
    )  # fmt: skip
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(src)], check=True)
    (wheel,) = wheels.glob("hvd_container-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    shutil.rmtree(src)  # nothing may come from the sources any more

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "t.py").write_text("import horovod.torch as hvd\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    env.pop("HVD_CONTAINER_SITE", None)

    def cli(*args: str) -> str:
        done = subprocess.run(
            [str(site / "bin" / "hvd-container"), *args],
            cwd=elsewhere, env=env, capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    where = subprocess.run(
        [sys.executable, "-c", "import containers, hvd_container, launcher, recipes\n"
         "print(*(m.__path__[0] for m in (containers, hvd_container, launcher, recipes)))"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert all(Path(p).is_relative_to(site) for p in where), where

    recipes = cli("recipes", "list")
    for name in _names(ROOT / "recipes"):
        assert name in recipes
    sites = cli("sites", "list")
    for name in _names(ROOT / "launcher" / "sites"):
        assert name in sites
    assert (
        cli("render", "cpu-bookworm") == (GOLDEN / "render" / "cpu-bookworm.Dockerfile").read_text()
    )
    assert (
        cli("render", "cpu-bookworm", "--format", "singularity")
        == (GOLDEN / "render" / "cpu-bookworm.def").read_text()
    )
    line = cli("run", "--site", "neuron", "--image", "x.sif", "--comment", "pytorch", "-n", "8",
               "--dry-run", "t.py")  # fmt: skip
    assert line == "srun --partition=amd_a100nv_8 --comment=pytorch -N 1 -n 8 --gres=gpu:8 --cpus-per-task=4 singularity run --nv x.sif python t.py\n"  # fmt: skip
    assert "--ntasks-per-node" in cli("run", "--help")
    assert cli("--version").startswith("hvd-container ")
