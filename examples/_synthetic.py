"""What the PyTorch examples share: their options, the synthetic dataset, the training loop
and checkpoints written whole or not at all. It sits next to them: a script's own folder is on its import path,
on the host and in the container alike."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

# Fault drills only: the epoch whose checkpoint stays half-written for 10 minutes, so that a
# test can kill the job in the middle of the write.
DRILL = "HVD_EXAMPLE_PAUSE_IN_CHECKPOINT"


def parse_args(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.01, help="base learning rate (one rank)")
    p.add_argument("--samples", type=int, default=4096, help="training samples in total")
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--checkpoint", default="checkpoint.pt", help="written by rank 0; resumed from if present"
    )
    p.add_argument("--no-cuda", action="store_true")
    return p.parse_args()


def synthetic_dataset(args: argparse.Namespace) -> TensorDataset:
    """The same dataset on every rank (same seed); the sampler gives each rank its shard: a
    fixed random "teacher" network labels random inputs, so the loss has something to learn."""
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.samples, args.features, generator=gen)
    teacher = torch.randn(args.features, args.classes, generator=gen)
    y = (x @ teacher + 0.1 * torch.randn(args.samples, args.classes, generator=gen)).argmax(1)
    return TensorDataset(x, y)


def save_checkpoint(state: dict, path: str) -> None:
    """Write the checkpoint whole or not at all: the previous one stays until the new one is
    on disk (rename within one directory is atomic)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as fh:
        torch.save(state, fh)
        if os.environ.get(DRILL) == str(state["epoch"]):
            fh.flush()
            print(f"[rank 0] drill: checkpoint of epoch {state['epoch']} half-written", flush=True)
            time.sleep(600)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a crash of the node
    finally:
        os.close(dir_fd)


def load_checkpoint(path: str) -> dict | None:
    """On rank 0: the last whole checkpoint, or None; a killed writer's leftovers go."""
    directory = os.path.dirname(os.path.abspath(path))
    prefix = os.path.basename(path) + ".tmp-"
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            if name.startswith(prefix):
                os.remove(os.path.join(directory, name))
    if not os.path.exists(path):
        return None
    return torch.load(path, map_location="cpu")


def train_epochs(  # type: ignore[no-untyped-def]
    args, model, optimizer, loader, sampler, device, first: int, rank: int,
    mean_over_ranks: Callable[[float], float], save: Callable[[int, float], None],
) -> None:  # fmt: skip
    """Epochs first..args.epochs. Each ends with its loss averaged over the ranks by the
    framework's allreduce (`mean_over_ranks`), then `save(epoch, mean_loss)`, which every rank
    calls (FSDP gathers its shards there; rank 0 writes). The median step time comes last."""
    step_times: list[float] = []
    for epoch in range(first, args.epochs + 1):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            start = time.perf_counter()
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            step_times.append(time.perf_counter() - start)
            total += loss.item() * len(x)
            count += len(x)
        local_loss = total / count
        mean_loss = mean_over_ranks(local_loss)
        print(
            f"[rank {rank}] epoch {epoch} loss {local_loss:.4f} (mean over ranks {mean_loss:.4f})",
            flush=True,
        )
        save(epoch, mean_loss)
    if rank == 0 and first <= args.epochs:
        print(f"[rank 0] checkpoint written to {os.path.abspath(args.checkpoint)}", flush=True)
    print(
        f"[rank {rank}] done: {len(step_times)} steps, median step time "
        f"{1000 * statistics.median(step_times or [0.0]):.3f} ms",
        flush=True,
    )
