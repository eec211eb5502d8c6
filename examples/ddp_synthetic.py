"""Data-parallel training with PyTorch's DistributedDataParallel on synthetic data (CPU or GPU).

torch.distributed's own way, as `hvd-container run --controller torch` (one srun task per
rank) or `--controller torchrun` (torchrun on each node) starts it: every rank finds its place
in RANK, WORLD_SIZE, LOCAL_RANK and MASTER_ADDR/MASTER_PORT (the env:// rendezvous), uses the
gloo backend on the CPU and nccl on GPUs (one GPU a rank, by LOCAL_RANK), and only rank 0
writes checkpoints: one after every epoch, written whole or not at all, so the same command
again resumes after the last whole epoch. It prints its median step time.

The data is made here (a fixed random "teacher" network labels random inputs), so nothing is
downloaded and the loss has something real to learn.
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import sys
from collections.abc import Callable

import torch
import torch.distributed as dist
from _synthetic import (  # beside it
    SEGMENT_EXIT,
    load_checkpoint,
    parse_args,
    saver,
    set_threads,
    sharded_data,
    small_model,
    train_epochs,
)
from torch.nn.parallel import DistributedDataParallel


def init(args: argparse.Namespace, kind: str) -> torch.device:
    """init_process_group from the env:// variables; the device of this rank."""
    use_cuda = torch.cuda.is_available() and not args.no_cuda
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
    backend = "nccl" if use_cuda else "gloo"
    device = torch.device("cuda", torch.cuda.current_device()) if use_cuda else torch.device("cpu")
    # device_id binds the group to this rank's GPU (torch warns at every barrier without it)
    dist.init_process_group(backend, device_id=device if use_cuda else None)
    torch.manual_seed(args.seed)
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    set_threads(local_size)
    rank = dist.get_rank()
    print(
        f"[rank {rank}] {kind} initialised: rank {rank} of size {dist.get_world_size()}, "
        f"local rank {local_rank} of {local_size}, backend {backend}, host "
        f"{socket.gethostname()}, rendezvous {os.environ.get('MASTER_ADDR')}:"
        f"{os.environ.get('MASTER_PORT')}, device {device}",
        flush=True,
    )
    return device


def resumed_epoch(checkpoint: dict | None) -> int:
    """The last whole epoch, as rank 0 read it, on every rank."""
    box = [checkpoint["epoch"] if checkpoint else 0]
    dist.broadcast_object_list(box, src=0)
    return int(box[0])


def finish() -> None:
    """Leave together: a rank that tears gloo down while rank 0 still writes the checkpoint
    now and then aborted ("terminate called without an active exception") after training."""
    dist.barrier()
    dist.destroy_process_group()


def collect_process_group() -> None:
    """After main() returned: DDP's module (FSDP's too) holds the process group in reference
    cycles that only the collector frees. Collected here, while the interpreter is whole,
    gloo's worker threads end now, not in the interpreter's finalization, where they aborted
    now and then after training ("terminate called without an active exception"; the
    mechanism: pytorch/pytorch#179291)."""
    gc.collect()


def mean_over_ranks(device: torch.device) -> Callable[[float], float]:
    """A number averaged over the ranks by an all_reduce (of a tensor on `device`: nccl
    reduces GPU tensors only)."""

    def mean(value: float) -> float:
        summed = torch.tensor([value], device=device)
        dist.all_reduce(summed)
        return summed.item() / dist.get_world_size()

    return mean


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    device = init(args, "torch.distributed DDP")
    rank, size = dist.get_rank(), dist.get_world_size()
    sampler, loader = sharded_data(args, rank, size)
    net = small_model(args, device)
    checkpoint = load_checkpoint(args.checkpoint) if rank == 0 else None
    if checkpoint is not None:
        net.load_state_dict(checkpoint["model"])
    done = resumed_epoch(checkpoint)
    # DDP broadcasts rank 0's parameters to the others when it wraps the model
    model = DistributedDataParallel(
        net, device_ids=[device.index] if device.type == "cuda" else None
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=0.9)
    if checkpoint is not None and "optimizer" in checkpoint:
        optimizer.load_state_dict(checkpoint["optimizer"])
    state = [optimizer.state_dict() if rank == 0 else None]
    dist.broadcast_object_list(state, src=0)
    optimizer.load_state_dict(state[0])

    save = saver(rank, args.checkpoint, lambda: (net.state_dict(), optimizer.state_dict()))
    stopped = train_epochs(
        args, model, optimizer, loader, sampler, device, done + 1, rank,
        mean_over_ranks(device), save,
    )  # fmt: skip
    finish()
    return SEGMENT_EXIT if stopped else 0  # the time limit came: the job goes on


if __name__ == "__main__":
    status = main()
    collect_process_group()
    sys.exit(status)
