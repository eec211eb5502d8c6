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
user set with -e (MASTER_PORT, say) wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from hvd_container.launcher.checks import Verdict, fail, warn
from hvd_container.launcher.controllers import Controller, _scan

if TYPE_CHECKING:
    from hvd_container.launcher.checks import Launch
    from hvd_container.launcher.request import LaunchRequest
    from hvd_container.launcher.sites import Site

    from hvd_container.facts import ImageFacts

# Around the srun line, where the job's node list is known (a batch script, inside salloc):
# the first node for every task of the step, also for runtimes whose tasks start inside the
# container, where there is no scontrol (Pyxis). One line: it goes into dry-run lines and
# batch scripts as it is.
STEP_SETUP = (
    'if [ -z "${MASTER_ADDR:-}" ] && [ -n "${SLURM_JOB_NODELIST:-}" ]; then '
    'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | head -n 1); '
    '[ -z "$MASTER_ADDR" ] || export MASTER_ADDR; fi; exec "$@"'
)

# On each task's node, before the runtime: $1 = the controller's own exports (constant sh
# text), the rest = the runtime's command. Without MASTER_ADDR, the first node of the step;
# MASTER_PORT from the job and step IDs; `here` = this node's tasks, read from
# SLURM_STEP_TASKS_PER_NODE ("2(x3),1": counts per node in SLURM_NODEID order).
RENDEZVOUS = (
    "own=$1; shift; nodes=${SLURM_STEP_NODELIST:-${SLURM_JOB_NODELIST:-}}; "
    '[ -n "${MASTER_ADDR:-}" ] || MASTER_ADDR=$(scontrol show hostnames "$nodes" 2>/dev/null | head -n 1); '
    'if [ -z "$MASTER_ADDR" ]; then echo "hvd-container torch: no first node: scontrol show hostnames $nodes gave nothing on $(hostname) (is this inside a Slurm step?)" >&2; exit 1; fi; '
    "MASTER_PORT=${MASTER_PORT:-$((20000 + (SLURM_JOB_ID % 2000) * 16 + ${SLURM_STEP_ID:-0} % 16))}; "
    "left=${SLURM_NODEID:-0}; rest=${SLURM_STEP_TASKS_PER_NODE:-1}; here=1; "
    'while [ -n "$rest" ]; do item=${rest%%,*}; '
    'if [ "$item" = "$rest" ]; then rest=; else rest=${rest#*,}; fi; '
    'times=1; case $item in *"(x"*) times=${item#*(x}; times=${times%)};; esac; '
    'if [ "$left" -lt "$times" ]; then here=${item%%(*}; break; fi; left=$((left - times)); done; '
    'export MASTER_ADDR MASTER_PORT; eval "$own"; exec "$@"'
)


# Runs in the container under --controller torch: rank and size from init_process_group, then
# an all_reduce with its sum checked and the bus bandwidth measured (not at one rank: a copy,
# not a network), over gloo on the CPU and over NCCL where there are GPUs, where an Average of
# an odd length is checked too. Lines start with SMOKE for doctor's parser.
SMOKE = r"""
import os, socket, time
import torch, torch.distributed as dist
cuda = torch.cuda.is_available() and dist.is_nccl_available()
if cuda:
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
dist.init_process_group("nccl" if cuda else "gloo")
rank, size = dist.get_rank(), dist.get_world_size()
print(f"SMOKE rank {rank} size {size} host {socket.gethostname()} controller torch", flush=True)
device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
one = torch.full((4,), float(rank + 1), device=device)
dist.all_reduce(one)
total = float(one[0])
ok = abs(total - size * (size + 1) / 2) < 1e-6
op = "nccl" if cuda else "gloo"
word = "ok" if ok else f"WRONG sum {total:g}"
if size > 1:
    big = torch.ones(4 * 1024 * 1024, device=device)
    dist.all_reduce(big)
    if cuda:
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(5):
        dist.all_reduce(big)
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / 5
    busbw = 2 * (size - 1) / size * big.numel() * 4 / seconds / 1e6
    print(f"SMOKE rank {rank} op torch-{op} allreduce {word} busbw {busbw:.1f} MB/s", flush=True)
else:  # one rank: a copy, not a network; no bandwidth to report
    print(f"SMOKE rank {rank} op torch-{op} allreduce {word}", flush=True)
if cuda:
    # an Average of an odd length on every rank: NCCL < 2.29.7 drops its tail (NVIDIA/nccl#1950)
    odd = torch.arange(4913, dtype=torch.float32, device=device) + rank
    dist.all_reduce(odd, op=dist.ReduceOp.AVG)
    want = torch.arange(4913, dtype=torch.float32, device=device) + (size - 1) / 2
    wrong = int((odd - want).abs().gt(1e-3).sum())
    word = "ok" if wrong == 0 else f"WRONG {wrong} of 4913 values (last {float(odd[-1]):g}, want {float(want[-1]):g})"
    print(f"SMOKE rank {rank} op torch-{op} average {word}", flush=True)
dist.destroy_process_group()
"""


class TorchController(Controller):
    """One of PyTorch's controllers: the rendezvous above, then `own` exports."""

    own: ClassVar[str]  # the exports of this controller, sh, after the rendezvous
    task_env: ClassVar[tuple[str, ...]]
    reads_srun_env = False

    def mpi_plugin(
        self, site: Site, request: LaunchRequest, facts: ImageFacts | None, single_task: bool
    ) -> tuple[str | None, str | None]:
        return request.mpi or "none", None  # torch.distributed needs no PMI

    def wrap_step(self, srun: list[str]) -> list[str]:
        return ["sh", "-c", STEP_SETUP, f"hvd-{self.name}", *srun]

    def wrap_task(self, launch: Launch, argv: list[str]) -> list[str]:
        return ["sh", "-c", RENDEZVOUS, f"hvd-{self.name}", self.exports(launch), *argv]

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
