"""Horovod over Gloo under srun, without horovodrun and without MPI.

Every task runs a small POSIX sh wrapper (inside the container, before the program): each
node's first task publishes the node's name under its SLURM_NODEID, so that the server learns
the nodes in the step's order without expanding a Slurm hostlist (whose grammar, `n[1-2]-ib`,
`a[01-02,05]b`, no hand-written parser in the image gets right); task 0 starts Horovod's own
`RendezvousServer` in the background with the image's python and publishes "ADDR PORT" in a
file in the shared working directory; every task then exports the HOROVOD_* variables
horovodrun would set (rank, sizes, rendezvous address, interface) from Slurm's per-task
variables and runs the program, whatever it is (a Python script, `python -m pytest`, a shell
script). Should the server die before it publishes its address, task 0 writes "failed CODE"
in that file instead, so the other tasks stop at once rather than after the 120 s wait. srun
starts no MPI (`--mpi=none`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hvd_container.launcher import runtimes
from hvd_container.launcher.checks.declarations import check
from hvd_container.launcher.checks.verdict import Verdict, fail, skip
from hvd_container.launcher.controllers._horovod import HorovodController
from hvd_container.launcher.plan.launch import Launch

from hvd_container.core.files import untrusted_because
from hvd_container.core.programs import program_text

if TYPE_CHECKING:
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.model import Site

    from hvd_container.facts import ImageFacts

# what the tasks run (launcher/programs/)
SERVER_CODE = program_text("hvd_container.launcher", "gloo_server.py")

IFACE_CODE = program_text("hvd_container.launcher", "gloo_iface.py")

WRAPPER = program_text("hvd_container.launcher", "gloo_wrapper.sh")


class Gloo(HorovodController):
    name = "gloo"
    about = "Horovod over Gloo: a rendezvous the launch starts in task 0, no MPI"

    def mpi_plugin(
        self, site: Site, request: LaunchRequest, facts: ImageFacts | None, single_task: bool
    ) -> tuple[str | None, str | None]:
        return request.mpi or "none", None

    def program(self, python: str, script: str, args: list[str]) -> list[str]:
        inner = super().program(python, script, args)
        return ["/bin/sh", "-c", WRAPPER, "hvd-gloo", SERVER_CODE, IFACE_CODE, python, *inner]

    def missing_in_image(self, launch: Launch) -> Verdict | None:
        facts = launch.facts
        if facts is None or self.built(facts) is not False:
            return None
        has = ", ".join(facts.controllers or ()) or "none"
        return fail(
            f"{facts.source} builds Horovod without the Gloo controller (it has {has}): pass --controller mpi, or add gloo to horovod.controllers and rebuild"
        )


def layout_problem(
    ntasks: int | None, nodes: int | None, ntasks_per_node: int | None
) -> str | None:
    """Gloo ranks take their local size from Slurm: the layout must be uniform."""
    if ntasks is not None and ntasks_per_node is None and (nodes or 1) > 1:
        return "--controller gloo needs the same number of ranks on every node: use -N and --ntasks-per-node instead of -n"
    if ntasks is not None and ntasks_per_node is not None and ntasks % ntasks_per_node:
        # Slurm would fill nodes up to --ntasks-per-node and leave the last one short
        return f"--controller gloo needs the same number of ranks on every node: -n {ntasks} is not a multiple of --ntasks-per-node {ntasks_per_node}"
    return None


@check("gloo-layout", "the same number of ranks on every node (Gloo reads it from Slurm)")
def even_layout(launch: Launch) -> Verdict | None:
    request = launch.request
    problem = layout_problem(request.ntasks, request.nodes, request.ntasks_per_node)
    return fail(problem) if problem else None


@check("gloo-folder", "the rendezvous folder's path can be written by you (and root) only")
def private_rendezvous(launch: Launch) -> Verdict | None:
    """Task 0 publishes the rendezvous address in the working directory's .hvd-container and
    every task reads it back: another user who can write on that path could swap the folder
    and send every rank to an address of theirs."""
    if os.environ.get("HVD_GLOO_DIR"):
        return None  # the user named the folder
    cwd = runtimes.working_directory()
    if not os.path.isdir(cwd):
        return skip(f"{cwd} cannot be read here, so who can write on its path is not known")
    why = untrusted_because(cwd)
    if why is None:
        return None
    return fail(
        f"{cwd}: {why}: the Gloo rendezvous address would be read back from there, where "
        "another user could swap it; launch from a folder only you (or root) can write, or "
        "set HVD_GLOO_DIR to such a folder"
    )
