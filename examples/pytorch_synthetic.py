"""Data-parallel training with Horovod and PyTorch on synthetic data (CPU or GPU).

The five Horovod steps, as the site guides teach them:
  1. hvd.init()
  2. pin each process to one GPU (its local rank), when there are GPUs
  3. scale the learning rate by the number of processes
  4. wrap the optimizer in hvd.DistributedOptimizer (gradients averaged by allreduce)
  5. broadcast the initial model and optimizer state from rank 0
and only rank 0 writes checkpoints: one after every epoch, written whole or not at all (a
temporary file in the same directory, flushed to disk, then renamed over the last one), so a
job killed at any moment leaves the last whole checkpoint. Run the same command again and it
resumes after that epoch (with `hvd-container batch --submit --requeue`, Slurm reruns it for
you after a node failure).

The data is made here (a fixed random "teacher" network labels random inputs), so nothing is
downloaded and the loss has something real to learn.  Launch with e.g.
  srun -N 2 --ntasks-per-node=1 --mpi=pmix python pytorch_synthetic.py --checkpoint ckpt.pt
"""

from __future__ import annotations

import socket
import sys

import horovod.torch as hvd
import torch
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


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    hvd.init()  # 1
    use_cuda = torch.cuda.is_available() and not args.no_cuda
    if use_cuda:
        torch.cuda.set_device(hvd.local_rank())  # 2
    device = torch.device("cuda" if use_cuda else "cpu")
    torch.manual_seed(args.seed)
    set_threads(hvd.local_size())

    controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "?"
    print(
        f"[rank {hvd.rank()}] horovod initialised: rank {hvd.rank()} of size {hvd.size()}, "
        f"local rank {hvd.local_rank()} of {hvd.local_size()}, cross rank {hvd.cross_rank()} "
        f"of {hvd.cross_size()}, controller {controller}, host {socket.gethostname()}, "
        f"device {device}",
        flush=True,
    )

    sampler, loader = sharded_data(args, hvd.rank(), hvd.size())
    model = small_model(args, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)  # 3
    optimizer = hvd.DistributedOptimizer(  # 4
        optimizer, named_parameters=model.named_parameters()
    )
    resumed = load_checkpoint(args.checkpoint) if hvd.rank() == 0 else None
    if resumed is not None:
        model.load_state_dict(resumed["model"])
        optimizer.load_state_dict(resumed["optimizer"])
    done = hvd.broadcast_object(resumed["epoch"] if resumed else 0, root_rank=0)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # 5
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    def mean_over_ranks(value: float) -> float:
        return hvd.allreduce(torch.tensor(value), name="epoch_loss").item()

    save = saver(hvd.rank(), args.checkpoint, lambda: (model.state_dict(), optimizer.state_dict()))
    stopped = train_epochs(
        args, model, optimizer, loader, sampler, device, done + 1, hvd.rank(), mean_over_ranks,
        save,
    )  # fmt: skip
    return SEGMENT_EXIT if stopped else 0


if __name__ == "__main__":
    sys.exit(main())
