"""Fully sharded data-parallel training (PyTorch FSDP2, fully_shard) on synthetic data.

Launched like ddp_synthetic.py (`--controller torch` or `torchrun`), with the same data,
rendezvous and checkpoints: each rank holds a shard of every layer's parameters and optimizer
state; the checkpoint is the full model and optimizer state gathered to rank 0 and written by
it, whole or not at all, and a restart loads it on rank 0 and shards it out again. gloo on the
CPU, nccl on GPUs. It prints its median step time.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from _synthetic import (
    SEGMENT_EXIT,
    load_checkpoint,
    parse_args,
    saver,
    sharded_data,
    small_model,
    train_epochs,
)
from ddp_synthetic import (  # the script's own folder
    collect_process_group,
    finish,
    init,
    mean_over_ranks,
    resumed_epoch,
)
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    device = init(args, "torch.distributed FSDP")
    rank, size = dist.get_rank(), dist.get_world_size()
    sampler, loader = sharded_data(args, rank, size)
    model = small_model(args, device)
    mesh = init_device_mesh(device.type, (size,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=0.9)

    checkpoint = load_checkpoint(args.checkpoint) if rank == 0 else None
    done = resumed_epoch(checkpoint)
    if done:
        # rank 0 has the full state; every rank takes its shard of it
        full = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        set_model_state_dict(model, checkpoint["model"] if checkpoint else {}, options=full)
        set_optimizer_state_dict(
            model, optimizer, checkpoint["optimizer"] if checkpoint else {}, options=full
        )

    gathered = StateDictOptions(full_state_dict=True, cpu_offload=True)

    # every rank takes part in gathering the shards; rank 0 writes
    save = saver(rank, args.checkpoint, lambda: (
        get_model_state_dict(model, options=gathered),
        get_optimizer_state_dict(model, optimizer, options=gathered),
    ))  # fmt: skip
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
