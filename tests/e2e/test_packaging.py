"""The wheel on its own: built from the sources, installed away from them, every command works.

Built-in recipes and site profiles must ship inside the wheel; a plain `pip install` is how
users get the tool onto a login node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"


def _copy_sources(target: Path) -> Path:
    """A copy of the sources to build a wheel from (setuptools' build/ stays out of the
    checkout), without tests and caches."""
    ignored = (".git", "build", "*.egg-info", "__pycache__", ".*cache", "tests", ".tools")
    shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns(*ignored))
    return target


def _names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml"))


@pytest.mark.e2e
def test_the_wheel_works_outside_the_source_tree(tmp_path: Path) -> None:
    src = _copy_sources(tmp_path / "src")
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(src)], check=True)
    (wheel,) = wheels.glob("hvd_container-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        tops = {n.split("/", 1)[0] for n in zf.namelist() if ".dist-info/" not in n}
    assert tops == {"hvd_container"}
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert "hvd_container/py.typed" in names  # type information for library users
    # editors' schemas, next to the files whose first line names them
    assert "hvd_container/recipes/recipe.schema.json" in names
    assert "hvd_container/launcher/sites/site.schema.json" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    # a throwaway distribution with a top-level `launcher` module, installed beside ours
    other = _throwaway_launcher(tmp_path / "other", wheels, pip)
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel), str(other)], check=True
    )
    assert (site / "launcher.py").is_file()
    shutil.rmtree(src)  # nothing may come from the sources any more

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "t.py").write_text("import horovod.torch as hvd\n")
    # and a user's own launcher.py in the working directory, which `python -m` puts first
    (elsewhere / "launcher.py").write_text(
        "raise SystemExit('the user launcher.py was imported')\n"
    )
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
        [sys.executable, "-c", "import hvd_container.containers as c, hvd_container.launcher as l\n"
         "import hvd_container.recipes as r\n"
         "print(*(m.__path__[0] for m in (c, l, r)))"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert all(Path(p).is_relative_to(site) for p in where), where
    perlmutter = ["run", "--site", "perlmutter", "--image", "u/i:t", "-n", "8", "--dry-run", "t.py"]
    expected = cli(*perlmutter)  # outside an allocation: what sbatch is given
    assert expected.startswith(f"sbatch --parsable --chdir={elsewhere} <<'HVD_CONTAINER_SCRIPT'\n")
    assert "\n#SBATCH --qos=regular\n#SBATCH --constraint=gpu\n" in expected
    assert "\nexport NCCL_SOCKET_IFNAME=hsn\n" in expected and "NCCL_NET=" not in expected
    assert expected.endswith(
        "\nsrun --mpi=pmi2 --kill-on-bad-exit=1 -N 2 -n 8 --cpus-per-task=32 shifter "
        "--module=gpu,nccl-plugin,mpich --image=docker:u/i:t python t.py\nHVD_CONTAINER_SCRIPT\n"
    )
    by_module = subprocess.run(
        [sys.executable, "-m", "hvd_container", *perlmutter],
        cwd=elsewhere, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert (by_module.returncode, by_module.stdout) == (0, expected), by_module.stderr

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
    line = cli("run", "--site", "neuron", "--image", "x.sif", "--comment", "field=ai;appl=pytorch", "-n", "8",
               "--dry-run", "t.py")  # fmt: skip
    assert "\n#SBATCH --comment=field=ai;appl=pytorch\n" in line
    assert line.endswith("\nsrun --kill-on-bad-exit=1 -N 1 -n 8 --cpus-per-task=4 singularity exec --nv x.sif python t.py\nHVD_CONTAINER_SCRIPT\n")  # fmt: skip
    assert "--ntasks-per-node" in cli("run", "--help")
    assert cli("--version").startswith("hvd-container ")


def _throwaway_launcher(folder: Path, wheels: Path, pip: list[str]) -> Path:
    """A wheel of a distribution named like PyPI's `launcher` 0.1: a top-level launcher module."""
    folder.mkdir()
    (folder / "launcher.py").write_text("WHO = 'someone else'\n")
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "launcher"\nversion = "0.1"\n'
        '[tool.setuptools]\npy-modules = ["launcher"]\n'
    )
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(folder)], check=True)
    (built,) = wheels.glob("launcher-*.whl")
    return built


@pytest.mark.e2e
def test_a_launch_only_install_runs_the_launch_commands(tmp_path: Path) -> None:
    # `pip install hvd-container` on a login node: the wheel and its dependencies, no extras
    src = _copy_sources(tmp_path / "src")
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp_path), str(src)], check=True)
    (wheel,) = tmp_path.glob("hvd_container-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "-q", "--disable-pip-version-check", "install", str(wheel)],
        check=True,
    )
    for module in ("docker", "requests", "spython"):
        absent = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True)
        assert absent.returncode != 0, f"{module} came with the launch-only install"
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "tests" / "fuzz" / "data" / "siftool-small.sif", work / "x.sif")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}  # fmt: skip
    env.pop("HVD_CONTAINER_SITE", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin" / "hvd-container"), *args],
            cwd=work, env=env, capture_output=True, text=True,
        )  # fmt: skip

    launch = [
        "--site",
        "neuron",
        "--image",
        "x.sif",
        "--comment",
        "field=ai;appl=pytorch",
        "-n",
        "8",
    ]
    for args in (
        ["sites", "list"],
        ["sites", "show", "perlmutter"],
        ["recipes", "list"],
        ["recipes", "show", "cpu-bookworm"],
        ["render", "cpu-bookworm"],
        ["render", "lightning-pt113", "--format", "singularity"],
        ["inspect", "x.sif"],
        ["schema", "recipe"],
        ["run", *launch, "--dry-run", "t.py"],
        ["run", *launch, "--dry-run", "--json", "t.py"],
        ["batch", *launch, "t.py"],
        ["jupyter", "--help"],
        ["jobs", "--help"],
    ):
        done = cli(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert done.stdout, args
    # the build side says in one line how to get it
    dockerfile = work / "Dockerfile"
    dockerfile.write_text("FROM debian:bookworm\nRUN true\n")
    for args in (
        ["build", "cpu-bookworm"],
        ["verify", "cpu-bookworm:1"],
        ["push", "cpu-bookworm", "--registry", "127.0.0.1:5000"],
        ["convert", "cpu-bookworm", "--to", "sif"],
        ["render", "--from-dockerfile", str(dockerfile), "--format", "singularity"],
    ):
        done = cli(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "pip install 'hvd-container[build]'" in lines[0], (args, lines)
