# The smoke payload of torch's controllers (`doctor --smoke`), run in the container under the
# launch: rank and size from init_process_group, then an all_reduce with its sum checked and the
# bus bandwidth measured (not at one rank: a copy, not a network), over gloo on the CPU and over
# NCCL where there are GPUs, where an Average of an odd length is checked too. Lines start with
# SMOKE for doctor's parser (launcher/run/doctor.py). It runs in the image's Python (3.8 and newer).
import os
import socket
import time

import torch
import torch.distributed as dist

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
    word = (
        "ok"
        if wrong == 0
        else f"WRONG {wrong} of 4913 values (last {float(odd[-1]):g}, want {float(want[-1]):g})"
    )
    print(f"SMOKE rank {rank} op torch-{op} average {word}", flush=True)
dist.destroy_process_group()
