"""Data-parallel training with Horovod and TensorFlow/Keras on synthetic data (CPU or GPU).

The five Horovod steps, as the site guides teach them:
  1. hvd.init()
  2. pin each process to one GPU (its local rank), when there are GPUs
  3. scale the learning rate by the number of processes
  4. wrap the optimizer in hvd.DistributedOptimizer
  5. broadcast the initial variables from rank 0 (BroadcastGlobalVariablesCallback)
and only rank 0 writes checkpoints.

The data is made here (a fixed random "teacher" labels random inputs); nothing is downloaded.
Launch with e.g.
  srun -N 2 --ntasks-per-node=1 --mpi=pmix python tensorflow_keras_synthetic.py
"""

from __future__ import annotations

import argparse
import os
import socket
import time

import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64, help="per process")
    p.add_argument("--lr", type=float, default=0.01, help="base learning rate (one process)")
    p.add_argument("--samples", type=int, default=4096, help="training samples in total")
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--checkpoint", default="checkpoint.keras", help="written by rank 0")
    return p.parse_args()


def synthetic_shard(args: argparse.Namespace, rank: int, size: int) -> tuple[np.ndarray, ...]:
    """The same data on every rank (same seed); each rank keeps every size-th sample."""
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((args.samples, args.features)).astype("float32")
    teacher = rng.standard_normal((args.features, args.classes)).astype("float32")
    y = (x @ teacher + 0.1 * rng.standard_normal((args.samples, args.classes))).argmax(1)
    return x[rank::size], y[rank::size]


class EpochLog(tf.keras.callbacks.Callback):
    """One line per rank per epoch, the local loss next to the mean over ranks."""

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        loss = float((logs or {}).get("loss", float("nan")))
        mean = float(hvd.allreduce(tf.constant(loss), name="epoch_loss"))
        print(
            f"[rank {hvd.rank()}] epoch {epoch + 1} loss {loss:.4f} (mean over ranks "
            f"{mean:.4f}) {time.perf_counter() - self.start:.2f}s",
            flush=True,
        )


def main() -> None:
    args = parse_args()
    hvd.init()  # 1
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")  # 2
    tf.random.set_seed(args.seed)
    print(
        f"[rank {hvd.rank()}] horovod initialised: rank {hvd.rank()} of size {hvd.size()}, "
        f"local rank {hvd.local_rank()} of {hvd.local_size()}, host {socket.gethostname()}, "
        f"gpus {len(gpus)}",
        flush=True,
    )

    x, y = synthetic_shard(args, hvd.rank(), hvd.size())
    model = tf.keras.Sequential(
        [
            tf.keras.Input(shape=(args.features,)),
            tf.keras.layers.Dense(args.hidden, activation="relu"),
            tf.keras.layers.Dense(args.classes),
        ]
    )
    optimizer = tf.keras.optimizers.SGD(learning_rate=args.lr * hvd.size(), momentum=0.9)  # 3
    optimizer = hvd.DistributedOptimizer(optimizer)  # 4
    model.compile(
        optimizer=optimizer,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),  # 5
        EpochLog(),
    ]
    model.fit(
        x,
        y,
        batch_size=args.batch_size,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=0,
        shuffle=True,
    )
    if hvd.rank() == 0:
        os.makedirs(os.path.dirname(os.path.abspath(args.checkpoint)), exist_ok=True)
        model.save(args.checkpoint)
        print(f"[rank 0] checkpoint written to {os.path.abspath(args.checkpoint)}", flush=True)


if __name__ == "__main__":
    main()
