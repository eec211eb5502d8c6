"""Data-parallel training with PyTorch Lightning under Slurm on synthetic data (CPU or GPU).

Lightning reads the Slurm environment itself (SLURMEnvironment) when started by srun, so the
launch line decides the world: launch with `-N <nodes> --ntasks-per-node=<devices>` (Lightning
refuses `srun -n`) and a job name other than `bash`/`interactive` (with those Lightning ignores
Slurm), and pass the same numbers here:
  srun -N 2 --ntasks-per-node=1 -J train python lightning_synthetic.py --num-nodes 2 --devices 1

The data-parallel steps match the Horovod scripts: one process per device, the learning rate
scaled by the world size, gradients averaged across processes (DDP), the same initial weights
everywhere, and only rank 0 writes the checkpoint.  Nothing is downloaded.

Past a time limit (`hvd-container run --until-done`) Lightning does it all: on Slurm's warning
(SIGUSR1) its SLURM environment writes hpc_ckpt_N.ckpt in the working directory and requeues
the job; a job started under Slurm resumes from the newest of those by itself.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket

import torch
import torch.nn.functional as F
from _synthetic import synthetic_dataset  # beside it: the data of every PyTorch example
from torch import nn
from torch.utils.data import DataLoader

try:
    import lightning.pytorch as pl
except ImportError:  # the older package name
    import pytorch_lightning as pl  # type: ignore[no-redef]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-nodes", type=int, default=int(os.environ.get("SLURM_NNODES", "1")))
    p.add_argument(
        "--devices",
        type=int,
        default=int(os.environ.get("SLURM_NTASKS_PER_NODE", "1").split("(")[0]),
        help="processes per node (= --ntasks-per-node)",
    )
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64, help="per process")
    p.add_argument("--lr", type=float, default=0.01, help="base learning rate (one process)")
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--checkpoint", default="checkpoint.ckpt", help="written by rank 0")
    return p.parse_args()


class Classifier(pl.LightningModule):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__()
        self.args = args
        self.net = nn.Sequential(
            nn.Linear(args.features, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.classes)
        )
        self.epoch_losses: list[torch.Tensor] = []

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.epoch_losses.append(loss.detach())
        return loss

    def on_train_start(self) -> None:
        if self.global_step:  # Lightning restored an hpc_ckpt_N.ckpt: a later segment
            print(
                f"[rank {self.global_rank}] resumed at epoch {self.current_epoch + 1}, "
                f"step {self.global_step}",
                flush=True,
            )

    def on_train_epoch_end(self) -> None:
        local = torch.stack(self.epoch_losses).mean()
        self.epoch_losses.clear()
        mean = self.all_gather(local).mean()
        print(
            f"[rank {self.global_rank}] epoch {self.current_epoch + 1} loss {local.item():.4f} "
            f"(mean over ranks {mean.item():.4f})",
            flush=True,
        )

    def configure_optimizers(self) -> torch.optim.Optimizer:
        lr = self.args.lr * self.trainer.world_size  # scaled like Horovod's step 3
        return torch.optim.SGD(self.parameters(), lr=lr, momentum=0.9)


def main() -> None:
    args = parse_args()
    # Lightning's SLURM environment answers Slurm's warning itself (hpc_ckpt_N.ckpt, requeue),
    # but sets its handler only where the script has none: _synthetic's watcher steps aside
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    pl.seed_everything(args.seed, workers=True)  # same initial weights on every rank
    use_gpu = torch.cuda.is_available()
    trainer = pl.Trainer(
        accelerator="gpu" if use_gpu else "cpu",
        devices=args.devices,
        num_nodes=args.num_nodes,
        strategy="ddp",
        max_epochs=args.epochs,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
    )
    model = Classifier(args)
    print(
        f"[rank {trainer.global_rank}] lightning world size {trainer.world_size}, "
        f"node rank {trainer.node_rank}, host {socket.gethostname()}",
        flush=True,
    )
    loader = DataLoader(synthetic_dataset(args), batch_size=args.batch_size, shuffle=True)
    trainer.fit(model, loader)  # Lightning adds the DistributedSampler
    trainer.save_checkpoint(args.checkpoint)  # writes on rank 0 only
    if trainer.global_rank == 0:
        print(f"[rank 0] checkpoint written to {os.path.abspath(args.checkpoint)}", flush=True)


if __name__ == "__main__":
    main()
