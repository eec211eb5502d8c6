"""MPI: Open MPI or MPICH from the distribution, with the PMIx/PMI2 libraries srun needs."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import apt_install, block, run

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe, Recipe

PACKAGES = {
    "openmpi": ["openmpi-bin", "libopenmpi-dev"],
    "mpich": ["mpich", "libmpich-dev"],
}
PMI_PACKAGES = {
    # Open MPI's PMIx component loads the system's libpmix (`srun --mpi=pmix`).
    "pmix": ["libpmix-dev"],
    # MPICH's PMI-1 client is built in; Slurm's pmi2 plugin serves it (`srun --mpi=pmi2`).
    "pmi2": [],
}


def packages(recipe: Recipe) -> list[str]:
    assert recipe.mpi is not None
    names = list(PACKAGES[recipe.mpi.flavor])
    for pmi in recipe.mpi.pmi:
        names += PMI_PACKAGES[pmi]
    return names


def render(recipe: LockedRecipe) -> Block | None:
    mpi = recipe.mpi
    if mpi is None or mpi.source == "pip":  # the wheel comes with the lock: blocks/mpi_wheel.py
        return None
    lines = []
    if mpi.source == "apt":
        lines.append(apt_install(packages(recipe)))
    # Open MPI prints "mpirun (Open MPI) 4.1.4", MPICH's hydra "Version: 4.0.2".
    check = "mpirun --version"
    if mpi.version:
        check += f" | grep -F {shlex.quote(mpi.version)}"
    lines.append(run(check))
    return block("mpi", *lines)
