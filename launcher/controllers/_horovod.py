"""What Horovod's controllers (mpi, gloo) share: the smoke test, NCCL for GPU tensors, and
whether the image's Horovod was built with a controller."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.launcher.checks import Verdict, warn
from hvd_container.launcher.controllers import Controller

if TYPE_CHECKING:
    from hvd_container.launcher.checks import Launch

    from hvd_container.facts import ImageFacts

# Runs in the container, under the launch: rank and size, then an allreduce with its sum
# checked and the bus bandwidth measured. Lines start with SMOKE for doctor's parser.
SMOKE = r"""
import socket, sys, time
try:
    import torch, horovod.torch as hvd
except ImportError:
    torch = None
    import numpy, tensorflow as tf, horovod.tensorflow as hvd
hvd.init()
rank, size, host = hvd.rank(), hvd.size(), socket.gethostname()
ctl = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "none"
print(f"SMOKE rank {rank} size {size} host {host} controller {ctl}", flush=True)

def check(device, op_name, count=4 * 1024 * 1024, rounds=5):
    if torch is not None:
        one = torch.full((4,), float(rank + 1), device=device)
        big = torch.ones(count, device=device)
        total = float(hvd.allreduce(one, op=hvd.Sum, name=f"{op_name}.sum")[0])
    else:
        one = tf.fill([4], float(rank + 1))
        big = tf.ones([count])
        total = float(hvd.allreduce(one, op=hvd.Sum, name=f"{op_name}.sum")[0])
    ok = abs(total - size * (size + 1) / 2) < 1e-6
    hvd.allreduce(big, op=hvd.Sum, name=f"{op_name}.warm")
    if device != "cpu":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for i in range(rounds):
        hvd.allreduce(big, op=hvd.Sum, name=f"{op_name}.{i}")
    if device != "cpu":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / rounds
    factor = 2 * (size - 1) / size if size > 1 else 1.0
    busbw = factor * count * 4 / seconds / 1e6
    word = "ok" if ok else f"WRONG sum {total:g}"
    print(f"SMOKE rank {rank} op {op_name} allreduce {word} busbw {busbw:.1f} MB/s", flush=True)

check("cpu", ctl)
if torch is not None and torch.cuda.is_available() and hvd.nccl_built():
    torch.cuda.set_device(hvd.local_rank())
    check(f"cuda:{hvd.local_rank()}", "nccl")
"""


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
