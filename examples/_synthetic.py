"""What the PyTorch examples share: their options, the synthetic dataset, the training loop
and checkpoints written whole or not at all. It sits next to them: a script's own folder is on its import path,
on the host and in the container alike."""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

# Fault drills only: the epoch whose checkpoint stays half-written for 10 minutes, so that a
# test can kill the job in the middle of the write.
DRILL = "HVD_EXAMPLE_PAUSE_IN_CHECKPOINT"
# bench/launch.py only: FILE,SIDE,STEPS (see Turns)
TURNS = "HVD_EXAMPLE_TURNS"
TURN_WAIT = 600.0  # seconds a side waits for its turn before it gives up
# `hvd-container run --until-done`: the signal that asks for a checkpoint before the time limit
CHECKPOINT_SIGNAL = "HVD_CHECKPOINT_SIGNAL"
SEGMENT_EXIT = 75  # EX_TEMPFAIL: stopped at the time limit with a checkpoint; the job goes on


class CheckpointAsked:
    """--until-done's contract: when $HVD_CHECKPOINT_SIGNAL (USR1) arrives, the epoch under way
    ends, its checkpoint is written and the script exits SEGMENT_EXIT; the next segment resumes
    there. Every rank gets the signal, not at the same step: they agree at the epoch's end."""

    def __init__(self) -> None:
        self.asked = False
        name = os.environ.get(CHECKPOINT_SIGNAL)
        self.signum = getattr(signal, f"SIG{name}") if name else None  # None: not watching
        if self.signum is not None:
            signal.signal(self.signum, self._ask)

    def _ask(self, signum: int, frame: object) -> None:
        self.asked = True

    def settled(self) -> None:
        """The epochs are over (all of them, or those before the asked checkpoint): a warning
        now asks for nothing. Ignored rather than left to the handler: Python puts the signal's
        default action back as it exits, and a warning then would end the rank by the signal,
        so that a finished training would go on in a next segment with nothing left to do."""
        if self.signum is not None:
            signal.signal(self.signum, signal.SIG_IGN)

    def agreed(self, mean_over_ranks: Callable[[float], float]) -> bool:
        """Did any rank get the signal? (an allreduce, only when watching)"""
        return self.signum is not None and mean_over_ranks(1.0 if self.asked else 0.0) > 0


# watching from the import on: a warning that comes while the framework starts is kept for
# the first epoch's end, so that every segment trains at least one epoch
ASKED = CheckpointAsked()


class Turns:
    """Two jobs on the same nodes (bench/launch.py: the container and the host) train in turns
    of STEPS steps, so that both meet the machine in the same state: FILE holds how many turns
    have been taken, and side SIDE (0 or 1) trains its k-th turn when it reads 2k + SIDE. Rank
    0 passes the turn on when its side next waits, so an epoch's end (the loss all-reduce, the
    checkpoint) stays in the side's own turn; each rank says it is ready (FILE.ready-SIDE-RANK)
    before its first wait, and the bench writes 0 once all are."""

    def __init__(self, spec: str, rank: int) -> None:
        path, side, steps = spec.rsplit(",", 2)
        self.path, self.side, self.steps, self.rank = path, int(side), int(steps), rank
        self.taken = -1  # the last turn this side trained
        with open(f"{path}.ready-{self.side}-{rank}", "w"):
            pass

    @classmethod
    def from_env(cls, rank: int) -> Turns | None:
        spec = os.environ.get(TURNS)
        return cls(spec, rank) if spec else None

    def _read(self) -> int | None:
        try:
            with open(self.path) as fh:
                return int(fh.read() or "-1")
        except (OSError, ValueError):
            return None

    def _pass(self) -> None:
        if self.rank == 0 and self.taken >= 0:
            tmp = f"{self.path}.tmp-{os.getpid()}"
            with open(tmp, "w") as fh:
                fh.write(str(2 * self.taken + self.side + 1))
            os.replace(tmp, self.path)

    def start(self, turn: int) -> None:
        """Pass the last turn on, then wait for this one."""
        self._pass()
        want, deadline = 2 * turn + self.side, time.monotonic() + TURN_WAIT
        while self._read() != want:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{TURNS}: no turn {turn} for side {self.side} in {TURN_WAIT} s")
            time.sleep(0.001)
        self.taken = turn

    def end(self) -> None:
        """After the last step: the other side's last turn may go."""
        self._pass()


def set_threads(local_size: int) -> None:
    """torch's intra-op threads: OMP_NUM_THREADS when the launch sets it (torch reads it
    itself), else this node's CPUs shared among its ranks."""
    if not os.environ.get("OMP_NUM_THREADS"):
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(max(1, cpus // max(1, local_size)))


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


def sharded_data(
    args: argparse.Namespace, rank: int, size: int
) -> tuple[DistributedSampler, DataLoader]:
    """This rank's shard of the dataset: its sampler (set_epoch reshuffles) and loader."""
    dataset = synthetic_dataset(args)
    sampler = DistributedSampler(dataset, num_replicas=size, rank=rank, shuffle=True)
    return sampler, DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)


def small_model(args: argparse.Namespace, device: torch.device) -> nn.Sequential:
    """The examples' network: one hidden layer."""
    return nn.Sequential(
        nn.Linear(args.features, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.classes)
    ).to(device)


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
    """On rank 0: the last whole checkpoint (said on stdout), or None; a killed writer's
    leftovers go."""
    directory = os.path.dirname(os.path.abspath(path))
    prefix = os.path.basename(path) + ".tmp-"
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            if name.startswith(prefix):
                os.remove(os.path.join(directory, name))
    if not os.path.exists(path):
        return None
    checkpoint = torch.load(path, map_location="cpu")
    print(
        f"[rank 0] resumed from {os.path.abspath(path)} after epoch {checkpoint['epoch']}",
        flush=True,
    )
    return checkpoint


def said_progress(path: str, epoch: int) -> None:
    """A line in $HVD_PROGRESS once a checkpoint is whole: a run that restarts (--until-done,
    --max-restarts) restarts a failed step only after progress, and says what it resumed from."""
    record = os.environ.get("HVD_PROGRESS")
    if record:
        with open(record, "a") as fh:
            fh.write(f"{os.path.abspath(path)} epoch {epoch}\n")


def saver(
    rank: int, path: str, state: Callable[[], tuple[dict, dict]]
) -> Callable[[int, float], None]:
    """train_epochs' `save`: every rank calls `state` for (model, optimizer) state dicts
    (FSDP gathers its shards there), and rank 0 alone writes them, so ranks never race on
    the file."""

    def save(epoch: int, mean_loss: float) -> None:
        model, optimizer = state()
        if rank == 0:
            save_checkpoint(
                {"epoch": epoch, "model": model, "optimizer": optimizer, "loss": mean_loss}, path
            )
            said_progress(path, epoch)

    return save


def said_turn(turn: int, step_times: list[float], cpu_times: list[float]) -> None:
    print(
        f"[rank 0] turn {turn}: {len(step_times)} steps, median step time "
        f"{1000 * statistics.median(step_times):.3f} ms, CPU time per step "
        f"{1000 * sum(cpu_times) / len(cpu_times):.3f} ms",
        flush=True,
    )


def train_epochs(  # type: ignore[no-untyped-def]
    args, model, optimizer, loader, sampler, device, first: int, rank: int,
    mean_over_ranks: Callable[[float], float], save: Callable[[int, float], None],
) -> bool:  # fmt: skip
    """Epochs first..args.epochs. Each ends with its loss averaged over the ranks by the
    framework's allreduce (`mean_over_ranks`), then `save(epoch, mean_loss)`, which every rank
    calls (FSDP gathers its shards there; rank 0 writes). The median step time comes last, with
    the process's CPU time per step (all its threads: the framework's own included). True when
    it stopped early, its checkpoint written, because the time limit is near (CheckpointAsked)."""
    stopped = False
    step_times: list[float] = []
    cpu_seconds = 0.0
    turns = Turns.from_env(rank)
    turn_start, cpu_turn = 0, []  # the step the current turn began with, its CPU times
    for epoch in range(first, args.epochs + 1):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            if turns is not None and len(step_times) % turns.steps == 0:
                if step_times and rank == 0:
                    said_turn(turns.taken, step_times[turn_start:], cpu_turn)
                turns.start(len(step_times) // turns.steps)
                turn_start, cpu_turn = len(step_times), []
            start, cpu_start = time.perf_counter(), time.process_time()
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            step_times.append(time.perf_counter() - start)
            cpu_seconds += time.process_time() - cpu_start
            if turns is not None:
                cpu_turn.append(time.process_time() - cpu_start)
            total += loss.item() * len(x)
            count += len(x)
        local_loss = total / count
        mean_loss = mean_over_ranks(local_loss)
        print(
            f"[rank {rank}] epoch {epoch} loss {local_loss:.4f} (mean over ranks {mean_loss:.4f})",
            flush=True,
        )
        save(epoch, mean_loss)
        if epoch < args.epochs and ASKED.agreed(mean_over_ranks):
            if rank == 0:
                print(f"[rank 0] stopping after epoch {epoch}: the time limit is near", flush=True)
            stopped = True
            break
    ASKED.settled()
    if turns is not None:
        if step_times and rank == 0:
            said_turn(turns.taken, step_times[turn_start:], cpu_turn)
        turns.end()
    if rank == 0 and first <= args.epochs:
        print(f"[rank 0] checkpoint written to {os.path.abspath(args.checkpoint)}", flush=True)
    print(
        f"[rank {rank}] done: {len(step_times)} steps, median step time "
        f"{1000 * statistics.median(step_times or [0.0]):.3f} ms, CPU time per step "
        f"{1000 * cpu_seconds / max(1, len(step_times)):.3f} ms",
        flush=True,
    )
    return stopped
