"""Horovod compiled once: in a stage of its own whose inputs are what the compile reads, then
installed into the image as a wheel.

Three stages. `horovod-deps`: the image's early blocks (base, Python, MPI, CUDA, NCCL, pip's
setup) and, from the lock, only what Horovod builds against: the frameworks it was asked for
(torch, TensorFlow), MPI and NCCL from PyPI, its build-time imports, and what those pull in
(uv's `# via` notes). `horovod-wheel`, from it: the compiler, and Horovod's sdist with its
patches and flags compiled into a wheel. The image, from `horovod-deps` too (torch installed
once): the rest of the lock, the wheel, the recipe's late blocks; no compiler. A recipe that
changes anything else (another pip package, an extra, a check) leaves every instruction of the
first two stages as it was, so the engine's layer cache hands back the wheel and nothing
compiles; a changed torch, MPI or flag changes them and compiles again.

Docker, rootless Podman and podman-hpc build the stages from the one Dockerfile. Shared through
a registry (containers/wheel_cache.py), the wheel travels as an image that holds only it
(`carrier`), and a build that has it starts its wheel stage from that image (`from_image`). A definition
file keeps Horovod's compile in its %post: Apptainer keeps no cache from one build to the next,
so a stage there would be built again every time, and the image's own build is the same work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks import gpu_wheels, horovod, mpi_wheel, pytorch
from hvd_container.containers.blocks import locked as locked_block
from hvd_container.containers.blocks._text import apt_install, block, pip_install, run
from hvd_container.containers.instructions import Arg, Copy, CopyFrom, From, Stage
from hvd_container.containers.lockfile import closure
from packaging.requirements import Requirement

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe

DEPS_STAGE = "horovod-deps"  # what the compile reads, installed: the image starts from it too
STAGE = "horovod-wheel"
WHEEL_DIR = "/opt/hvd/wheels"
BUILD_LOCK_FILE = f"{locked_block.LOCK_DIR}/horovod-build.lock"


def applies(recipe: LockedRecipe) -> bool:
    """A locked recipe with Horovod: the stage's packages come from the lock, hashes checked."""
    return recipe.horovod is not None and recipe.lock is not None


def build_roots(recipe: LockedRecipe) -> list[str]:
    """The lock's packages Horovod's compile reads: the frameworks it builds against, MPI and
    NCCL wheels, its own build-time imports."""
    hvd = recipe.horovod
    assert hvd is not None
    roots = [*horovod.BUILD_PYTHON_DEPS]
    roots += mpi_wheel.requirements(recipe) + gpu_wheels.requirements(recipe)
    if "pytorch" in hvd.frameworks and recipe.pytorch is not None:
        roots.append("torch")
    if {"tensorflow", "keras"} & set(hvd.frameworks) and recipe.tensorflow is not None:
        roots.append(recipe.tensorflow.package)
    return [Requirement(r).name for r in roots]


def build_lock(recipe: LockedRecipe) -> str:
    """The part of the lock the stage installs: the roots and what they pull in, without the
    lock's header and notes (they change with the rest of the recipe)."""
    assert recipe.lock is not None
    return closure(recipe.lock, build_roots(recipe))


def deps_blocks(recipe: LockedRecipe, early: list[Block]) -> list[Block]:
    """The stage both others start from: the image's early blocks (`early`: from the base to
    pip's setup), the build lock, MPI's and the GPU wheels' layout."""
    url = pytorch.index_url(recipe)  # where the locked torch files are (hashes still checked)
    index = [f"--extra-index-url {url}"] if url else []
    wheels = [b for b in (mpi_wheel.render(recipe), gpu_wheels.render(recipe)) if b is not None]
    return [
        *early,
        block(
            "frameworks",
            Copy("horovod-build.lock", BUILD_LOCK_FILE, build_lock(recipe).encode()),
            run(pip_install("--require-hashes", "--no-deps", *index, "-r", BUILD_LOCK_FILE)),
        ),
        *wheels,
    ]


def wheel_blocks(recipe: LockedRecipe, args: list[Arg]) -> list[Block]:
    """The stage that compiles: from DEPS_STAGE, the compiler, Horovod built into WHEEL_DIR.
    args: the build's ARGs, declared again (an ARG holds in its own stage only)."""
    _packages, entry = locked_block.parts(recipe)
    return [
        block(
            "horovod",
            From(DEPS_STAGE, stage=STAGE),
            *args,
            apt_install(horovod.build_packages(recipe)),
            Copy("horovod.lock", locked_block.HOROVOD_LOCK_FILE, entry.encode()),
            run(*horovod.compile_commands(recipe, wheel_dir=WHEEL_DIR)),
        )
    ]


def from_image(image: str) -> Stage:
    """The wheel stage as an image that holds the compiled wheel already (`carrier`'s, pulled
    or built before): nothing compiles."""
    return Stage(STAGE, (block("horovod", From(image, stage=STAGE)),))


def carrier() -> Stage:
    """The image that carries the wheel: only WHEEL_DIR, copied from the compile's stage."""
    return Stage(
        None,
        (block("horovod", From("scratch"), CopyFrom(STAGE, f"{WHEEL_DIR}/", f"{WHEEL_DIR}/")),),
    )


def image_start(args: list[Arg]) -> Block:
    """Where the image starts: from DEPS_STAGE (its packages installed once for both), with the
    build's ARGs declared again."""
    return block("frameworks", From(DEPS_STAGE), *args)


def install(recipe: LockedRecipe) -> Block:
    """The image's Horovod: the stage's wheel installed (no compiler in the image), checked."""
    hvd = recipe.horovod
    assert hvd is not None
    return block(
        "horovod",
        CopyFrom(STAGE, f"{WHEEL_DIR}/", f"{WHEEL_DIR}/"),
        run(
            pip_install("--no-deps", f"{WHEEL_DIR}/horovod-{hvd.version}-*.whl"),
            *horovod.checked(recipe),
        ),
    )
