# The smoke payload of Horovod's controllers (`doctor --smoke`), run in the container under the
# launch: rank and size, then an allreduce with its sum checked and the bus bandwidth measured
# (not at one rank: a copy, not a network), and an Average of an odd length checked. Lines start
# with SMOKE for doctor's parser (launcher/run/doctor.py). It runs in the image's Python (3.8 and
# newer).
import socket
import time

import numpy

try:
    import horovod.torch as hvd
    import torch
except ImportError:
    torch = None
    import horovod.tensorflow as hvd
    import tensorflow as tf
hvd.init()
rank, size, host = hvd.rank(), hvd.size(), socket.gethostname()
ctl = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "none"
print(f"SMOKE rank {rank} size {size} host {host} controller {ctl}", flush=True)


def check(device, op_name, count=4 * 1024 * 1024, rounds=5):
    if torch is not None:
        one = torch.full((4,), float(rank + 1), device=device)
        big = torch.ones(count, device=device)
        # made on the CPU, and a block of its size holding a sentinel freed just before the
        # Average: the allocator hands that block to the output, so an unwritten tail shows
        odd = (torch.arange(4913, dtype=torch.float32) + rank).to(device)
    else:
        one = tf.fill([4], float(rank + 1))
        big = tf.ones([count])
        odd = tf.range(4913, dtype=tf.float32) + rank
    total = float(hvd.allreduce(one, op=hvd.Sum, name=f"{op_name}.sum")[0])
    word = "ok" if abs(total - size * (size + 1) / 2) < 1e-6 else f"WRONG sum {total:g}"
    if size > 1:
        hvd.allreduce(big, op=hvd.Sum, name=f"{op_name}.warm")
        if device != "cpu":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for i in range(rounds):
            hvd.allreduce(big, op=hvd.Sum, name=f"{op_name}.{i}")
        if device != "cpu":
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - started) / rounds
        busbw = 2 * (size - 1) / size * count * 4 / seconds / 1e6
        print(f"SMOKE rank {rank} op {op_name} allreduce {word} busbw {busbw:.1f} MB/s", flush=True)
    else:  # one rank: a copy, not a network; no bandwidth to report
        print(f"SMOKE rank {rank} op {op_name} allreduce {word}", flush=True)
    # an Average of an odd length on every rank: Horovod >= 0.28 maps it to ncclAvg, whose tail
    # NCCL < 2.29.7 drops (NVIDIA/nccl#1950)
    if torch is not None:
        torch.full((4913,), -7.0, device=device)
    got = hvd.allreduce(odd, op=hvd.Average, name=f"{op_name}.avg")
    got = got.cpu().numpy() if torch is not None else got.numpy()
    want = numpy.arange(4913, dtype=numpy.float32) + (size - 1) / 2
    wrong = int((abs(got - want) > 1e-3).sum())
    word = (
        "ok"
        if wrong == 0
        else f"WRONG {wrong} of 4913 values (last {float(got[-1]):g}, want {float(want[-1]):g})"
    )
    print(f"SMOKE rank {rank} op {op_name} average {word}", flush=True)


check("cpu", ctl)
if torch is not None and torch.cuda.is_available() and hvd.nccl_built():
    torch.cuda.set_device(hvd.local_rank())
    check(f"cuda:{hvd.local_rank()}", "nccl")
