"""Horovod built from source against the frameworks, controllers and GPU operations asked for.

`--no-build-isolation` always: Horovod's build imports the installed torch/tensorflow, which an
isolated build environment would not see. Patches listed in the recipe are applied to the
unpacked sdist before building, and so are those the release always needs (see
horovod_patches.py: gcc13 up to 0.28.1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks import gpu_wheels, horovod_patches
from hvd_container.containers.blocks import locked as locked_block
from hvd_container.containers.blocks._text import apt_install, block, pip_install, pip_wheel, run
from hvd_container.containers.instructions import Copy

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe, Recipe

# Horovod's own build-time imports, absent from a fresh venv when the build is not isolated.
BUILD_PYTHON_DEPS = ["setuptools", "wheel", "packaging", "cloudpickle", "psutil", "pyyaml"]
CUDA_STUBS = "/usr/local/cuda/lib64/stubs"


def build_env(recipe: Recipe) -> dict[str, str]:
    """The HOROVOD_* variables of the build, WITH_ and WITHOUT_ spelled out for each choice."""
    hvd = recipe.horovod
    assert hvd is not None
    flags: dict[str, str] = {}
    wanted = {
        "TENSORFLOW": "tensorflow" in hvd.frameworks or "keras" in hvd.frameworks,
        "PYTORCH": "pytorch" in hvd.frameworks,
        "MXNET": False,
        "MPI": "mpi" in hvd.controllers,
        "GLOO": "gloo" in hvd.controllers,
    }
    for name, on in wanted.items():
        flags[f"HOROVOD_{'WITH' if on else 'WITHOUT'}_{name}"] = "1"
    if hvd.gpu_operations:
        flags["HOROVOD_GPU_OPERATIONS"] = hvd.gpu_operations.upper()
        flags["HOROVOD_CUDA_HOME"] = "/usr/local/cuda"
    if recipe.nccl is not None and recipe.nccl.source == "pip" and recipe.cuda is not None:
        flags["HOROVOD_NCCL_HOME"] = gpu_wheels.nccl_dir(recipe)
    if hvd.nccl_link:
        flags["HOROVOD_NCCL_LINK"] = hvd.nccl_link.upper()
    if hvd.cuda_cc:  # else Horovod builds every architecture nvcc lists
        flags["HOROVOD_BUILD_CUDA_CC_LIST"] = ",".join(hvd.cuda_cc)
    return dict(sorted(flags.items()))


def patches(recipe: Recipe) -> list[str]:
    """The patches applied to the sdist: the recipe's, then those its release always needs."""
    hvd = recipe.horovod
    assert hvd is not None
    listed = list(hvd.patches)
    return listed + [p for p in horovod_patches.needed(hvd.version) if p not in listed]


def build_packages(recipe: Recipe) -> list[str]:
    packages = ["cmake", "g++", "make"]
    if recipe.python.source == "system":
        packages.append(f"python{recipe.python.version}-dev")
    return packages


def compile_commands(recipe: LockedRecipe, *, wheel_dir: str | None = None) -> list[str]:
    """The commands that compile Horovod: installed into the venv, or with wheel_dir built into a
    wheel there (the wheel stage, containers/blocks/horovod_wheel.py) and not installed."""
    hvd = recipe.horovod
    assert hvd is not None
    flags = " ".join(f"{k}={v}" for k, v in build_env(recipe).items())
    locked = recipe.lock is not None
    # with a lock: the sdist checked against its hash, the dependencies already installed
    source = (
        ["--require-hashes", "-r", locked_block.HOROVOD_LOCK_FILE]
        if locked
        else [f"horovod=={hvd.version}"]
    )
    no_deps = ["--no-deps"] if locked else []

    def pip(*args: str) -> str:
        if wheel_dir is None:
            return pip_install("--no-build-isolation", *no_deps, *args)
        return pip_wheel("--no-build-isolation", "--no-deps", "-w", wheel_dir, *args)

    commands: list[str] = []
    if recipe.cuda is not None and recipe.cuda.source == "image":
        # No GPU (and so no libcuda.so.1) on the builder: link against the toolkit's stubs
        # (Horovod dlopens libcuda, so the wheels' toolkit, which has no stubs, needs none).
        commands.append(f"ldconfig {CUDA_STUBS}")
    applied = patches(recipe)
    if applied:
        commands += [
            "hvd_src=$(mktemp -d)",
            'hvd-pip download --no-deps --no-binary :all: -d "$hvd_src" ' + " ".join(source),
            f'tar -xzf "$hvd_src/horovod-{hvd.version}.tar.gz" -C "$hvd_src"',
            f'cd "$hvd_src/horovod-{hvd.version}"',
        ]
        for name in applied:
            commands += horovod_patches.commands(name)
        commands += [f"{flags} {pip('.')}", "cd /", 'rm -rf "$hvd_src"']
    else:
        commands.append(f"{flags} {pip(*source)}")
    return commands


def checked(recipe: LockedRecipe) -> list[str]:
    """What follows Horovod's install: the linker cache (GPU libraries), then its own check."""
    return [*(["ldconfig"] if recipe.gpu else []), "horovodrun --check-build"]


def render(recipe: LockedRecipe) -> Block | None:
    hvd = recipe.horovod
    if hvd is None:
        return None
    commands = [*compile_commands(recipe), *checked(recipe)]
    if recipe.lock is not None:
        _packages, entry = locked_block.parts(recipe)
        return block(
            "horovod",
            apt_install(build_packages(recipe)),
            Copy("horovod.lock", locked_block.HOROVOD_LOCK_FILE, entry.encode()),
            run(*commands),
        )
    return block(
        "horovod",
        apt_install(build_packages(recipe)),
        run(pip_install(*BUILD_PYTHON_DEPS)),
        run(*commands),
    )
