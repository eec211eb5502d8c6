"""What Horovod's controllers (mpi, gloo) share: the smoke test, NCCL for GPU tensors, and
whether the image's Horovod was built with a controller."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.launcher.checks.verdict import Verdict, warn
from hvd_container.launcher.controllers import Controller

from hvd_container.core.programs import program_text

if TYPE_CHECKING:
    from hvd_container.launcher.plan.launch import Launch

    from hvd_container.facts import ImageFacts

# the smoke payload of Horovod's controllers (launcher/programs/)
SMOKE = program_text("hvd_container.launcher", "horovod_smoke.py")


class HorovodController(Controller):
    """A Horovod controller: built into the image's Horovod or not, NCCL for GPU tensors."""

    smoke = SMOKE

    def built(self, facts: ImageFacts) -> bool | None:
        """Whether the image's Horovod has this controller (None: not known)."""
        if facts.controllers is None:
            return None
        return self.name in facts.controllers

    def available(self, facts: ImageFacts | None) -> bool:
        return facts is None or self.built(facts) is not False

    def gpu_problem(self, launch: Launch) -> Verdict | None:
        """A GPU launch of an image whose Horovod has no NCCL: GPU tensors are reduced through
        host memory by MPI or Gloo, far slower (check-build's facts, recorded at build)."""
        facts = launch.facts
        if facts is None or facts.tensor_ops is None or not facts.gpu:
            return None
        if "nccl" in facts.tensor_ops:
            return None
        ops = ", ".join(facts.tensor_ops) or "none"
        return warn(
            f"{facts.source} has Horovod without NCCL (tensor operations: {ops}): GPU tensors "
            "are reduced through host memory; build with horovod.gpu_operations: nccl"
        )
