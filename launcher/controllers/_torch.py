"""What PyTorch's own controllers (torch, torchrun) share: the rendezvous every task gets
before its container starts, what they need in the image, and their smoke test.

The srun line runs under a small POSIX sh wrapper that sets MASTER_ADDR, the first node of the
job, from `scontrol show hostnames` of its node list (Slurm's own hostlist expansion, never a
hand-written one) where the job's node list is known (a batch script, inside an allocation).
Each srun task then runs a second one on its node, before the container (inside it for Pyxis):
without MASTER_ADDR it takes the first node of the step the same way, MASTER_PORT comes from
the job and step IDs (two jobs on one node do not collide), and the controller's variables
follow from srun's per-task ones. The runtime then starts the container with them (each
runtime passes the names the controller lists, podman-hpc's `-e NAME` included). A value the
user set with -e (MASTER_PORT, say) wins. A site's `first_node_suffix` (JSC's `i`) is appended
to the first node's name both take, and handed to them as an argument of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from hvd_container.launcher.checks.verdict import Verdict, fail, warn
from hvd_container.launcher.controllers import Controller, _scan

from hvd_container.core.programs import program_text

if TYPE_CHECKING:
    from hvd_container.launcher.plan.launch import Launch
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.model import Site

    from hvd_container.facts import ImageFacts

# what the step and each task run first (launcher/programs/)
STEP_SETUP = program_text("hvd_container.launcher", "torch_step_setup.sh")

RENDEZVOUS = program_text("hvd_container.launcher", "torch_rendezvous.sh")


SMOKE = program_text("hvd_container.launcher", "torch_smoke.py")


class TorchController(Controller):
    """One of PyTorch's controllers: the rendezvous above, then `own` exports."""

    own: ClassVar[str]  # the exports of this controller, sh, after the rendezvous
    task_env: ClassVar[tuple[str, ...]]
    reads_srun_env = False
    one_gpu_per_rank = True  # the scripts take cuda:LOCAL_RANK

    def mpi_plugin(
        self, site: Site, request: LaunchRequest, facts: ImageFacts | None, single_task: bool
    ) -> tuple[str | None, str | None]:
        return request.mpi or "none", None  # torch.distributed needs no PMI

    def wrap_step(self, launch: Launch, srun: list[str]) -> list[str]:
        suffix = launch.site.first_node_suffix or ""
        return ["sh", "-c", STEP_SETUP, f"hvd-{self.name}", suffix, *srun]

    def wrap_task(self, launch: Launch, argv: list[str]) -> list[str]:
        suffix = launch.site.first_node_suffix or ""
        return ["sh", "-c", RENDEZVOUS, f"hvd-{self.name}", suffix, self.exports(launch), *argv]

    def exports(self, launch: Launch) -> str:
        return self.own

    def environment(self, script: str, gpus: int) -> dict[str, str]:
        # Accelerate takes a CPU launch for one process per node without it, and each rank then
        # runs alone (`accelerate launch --cpu` sets it)
        if gpus == 0 and _scan.read(script).shows(_scan.ACCELERATE):
            return {"ACCELERATE_USE_CPU": "1"}
        return {}

    def application(self, facts: ImageFacts | None) -> str | None:
        return "pytorch-ddp"

    def missing_in_image(self, launch: Launch) -> Verdict | None:
        facts = launch.facts
        if facts is None:
            return None
        if facts.torch is False:
            return fail(
                f"{facts.source} has no PyTorch: --controller {self.name} runs torch.distributed; pick an image with PyTorch"
            )
        backends = facts.torch_backends
        if backends is None:
            return None
        if launch.gpus and "nccl" not in backends:
            return fail(
                f"{facts.source}'s torch.distributed has no NCCL (it has {', '.join(backends) or 'none'}): GPU ranks would fall back to gloo over TCP; build it with a CUDA PyTorch"
            )
        if "gloo" not in backends and not launch.gpus:
            return warn(
                f"{facts.source}'s torch.distributed has no gloo (it has {', '.join(backends) or 'none'}): CPU ranks cannot talk"
            )
        return None

    def available(self, facts: ImageFacts | None) -> bool:
        return facts is not None and bool(facts.torch) and bool(facts.torch_backends)
