"""Containerised Horovod training across the two nodes of the local Slurm cluster.

The CPU image (torch + Horovod + Debian's Open MPI) converted to SIF runs under ch-run on
node1 and node2: over MPI (srun --mpi=pmix), over Gloo (Horovod's rendezvous started by the
launcher), and through `batch --submit`; Lightning runs on it too, and the Keras example on its
sibling with TensorFlow and PyTorch (recipe cpu-bookworm-tf-pt). Each run trains a small model
on synthetic data.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.build_fixtures import reaped, started
from tests.e2e.sif_fixtures import ROOT
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    cpu_sif,
    job_dir,
    lightning_packages,
    lightning_run,
    slurm_cluster,
    tf_sif,
)

pytestmark = pytest.mark.e2e

EXAMPLE = ROOT / "examples" / "pytorch_synthetic.py"


@pytest.fixture()
def cluster(slurm_cluster: str, charliecloud_runtime: None) -> None:  # noqa: F811
    return None


def _losses(stdout: str, rank: int) -> list[float]:
    return [
        float(m.group(1))
        for m in re.finditer(rf"^\[rank {rank}\] epoch \d+ loss ([0-9.]+)", stdout, re.M)
    ]


def _check_training(stdout: str, controller: str | None, checkpoint: Path) -> None:
    """Size 2 on node1 and node2 (over controller, where the example prints it), the loss
    falling on both ranks over 4 epochs, and the checkpoint written by rank 0 alone."""
    over = f".* controller {controller}, host" if controller else ".*host"
    for rank, node in ((0, "node1"), (1, "node2")):
        assert re.search(
            rf"^\[rank {rank}\] horovod initialised: rank {rank} of size 2, {over} {node}",
            stdout,
            re.M,
        ), stdout
        losses = _losses(stdout, rank)
        assert len(losses) == 4, stdout
        assert losses[-1] < losses[0] * 0.8, losses
    assert f"[rank 0] checkpoint written to {checkpoint}" in stdout
    assert "[rank 1] checkpoint written" not in stdout
    assert checkpoint.is_file() and checkpoint.stat().st_size > 1000


def _train(*extra: str, checkpoint: Path, image: Path | None, cwd: Path, command: str = "run"):  # type: ignore[no-untyped-def]
    return cli(
        *([command] if command == "run" else ["batch"]),
        "--site", "local", *(["--image", str(image)] if image else []),
        "-N", "2", "--ntasks-per-node", "1",
        *extra,
        *(["--submit"] if command == "batch" else []),
        str(EXAMPLE), "--epochs", "4", "--checkpoint", str(checkpoint),
        cwd=cwd, timeout=900,
    )  # fmt: skip


def test_two_node_training_over_mpi(cluster: None, cpu_sif: Path, job_dir: Path) -> None:  # noqa: F811
    checkpoint = job_dir / "ckpt" / "model.pt"
    result = _train(checkpoint=checkpoint, image=cpu_sif, cwd=job_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "submitted batch job" in result.stderr
    _check_training(result.stdout, "mpi", checkpoint)


def test_two_node_training_over_gloo(cluster: None, cpu_sif: Path, job_dir: Path) -> None:  # noqa: F811
    checkpoint = job_dir / "gloo.pt"
    result = _train("--controller", "gloo", checkpoint=checkpoint, image=cpu_sif, cwd=job_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    _check_training(result.stdout, "gloo", checkpoint)
    assert not list((job_dir / ".hvd-container").glob("gloo-*"))  # rendezvous file removed


# not a .py file: a shell line, `python -m`, a script of another kind all find their peers
GLOO_PROGRAMS = {
    "sh -c": ["sh", "-c", 'exec /opt/venv/bin/python -c "{code}"'],
    "python -c": ["/opt/venv/bin/python", "-c", "{code}"],
}
HVD_SIZE = "import horovod.torch as hvd; hvd.init(); print('rank', hvd.rank(), 'of', hvd.size())"


@pytest.mark.parametrize("program", GLOO_PROGRAMS)
def test_gloo_finds_its_peers_for_any_program(
    program: str,
    cluster: None,
    cpu_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    argv = [word.format(code=HVD_SIZE) for word in GLOO_PROGRAMS[program]]
    result = cli(
        "run", "--site", "local", "--image", str(cpu_sif), "-N", "2", "--ntasks-per-node", "1",
        "--controller", "gloo", *argv, cwd=job_dir, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 0 of 2" in result.stdout and "rank 1 of 2" in result.stdout, result.stdout


def test_two_node_training_through_batch_submit_with_the_recipes_sif(
    cluster: None,
    cpu_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    # `--recipe` without `--image`: the local site's images.template names the SIF the way
    # `convert --to sif` does by default (<name>_<version>.sif, in the working directory).
    (job_dir / "cpu-bookworm_1.sif").symlink_to(cpu_sif)
    checkpoint = job_dir / "batch.pt"
    result = _train(
        "--recipe", "cpu-bookworm", checkpoint=checkpoint, image=None, cwd=job_dir, command="batch"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    job_id = re.search(r"submitted batch job (\d+)", result.stderr).group(1)  # type: ignore[union-attr]
    _check_training(result.stdout, "mpi", checkpoint)
    assert (job_dir / f"pytorch_synthetic_{job_id}.out").is_file()


def test_a_killed_training_resumes_from_its_last_whole_checkpoint(
    cluster: None,
    cpu_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """Killed in its third epoch while that epoch's checkpoint is half-written (the example's
    fault drill holds the write open), the job leaves epoch 2's checkpoint whole; the same
    command again resumes after epoch 2 and trains on from there."""
    import signal

    checkpoint = job_dir / "ckpt" / "model.pt"
    launch = ["run", "--site", "local", "--image", str(cpu_sif), "-N", "2",
              "--ntasks-per-node", "1"]  # fmt: skip
    train = [str(EXAMPLE), "--epochs", "5", "--checkpoint", str(checkpoint)]
    first: list[str] = []
    with reaped(started(*launch, "-e", "HVD_EXAMPLE_PAUSE_IN_CHECKPOINT=3", *train,
                        cwd=job_dir)) as proc:  # fmt: skip
        assert proc.stdout is not None
        while not any("drill: checkpoint of epoch 3 half-written" in line for line in first):
            line = proc.stdout.readline()
            assert line, "".join(first) + (proc.stderr.read() if proc.stderr else "")
            first.append(line)
        proc.send_signal(signal.SIGTERM)  # run cancels the job: its ranks are killed
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert list(checkpoint.parent.glob("model.pt.tmp-*")), "the drill left no half-written file"
    before = _losses("".join(first), 0)
    assert len(before) == 3, first  # epochs 1-3 trained, epoch 3's checkpoint not whole

    result = cli(*launch, *train, cwd=job_dir, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"[rank 0] resumed from {checkpoint} after epoch 2" in out, out
    epochs = re.findall(r"^\[rank 0\] epoch (\d+) loss", out, re.M)
    assert epochs == ["3", "4", "5"], out
    after = _losses(out, 0)
    assert after[0] < before[0] * 0.8, (before, after)  # trained on, not from the start
    assert f"[rank 0] checkpoint written to {checkpoint}" in out
    assert not list(checkpoint.parent.glob("model.pt.tmp-*"))


def test_two_node_lightning_training(
    cluster: None,
    cpu_sif: Path,  # noqa: F811
    lightning_packages: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    checkpoint = job_dir / "lightning.ckpt"
    result = cli(
        *lightning_run(cpu_sif, lightning_packages, nodes=2),
        str(ROOT / "examples" / "lightning_synthetic.py"), "--epochs", "4",
        "--checkpoint", str(checkpoint), cwd=job_dir, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for rank in (0, 1):
        assert f"[rank {rank}] lightning world size 2" in out, out
        losses = _losses(out, rank)
        assert len(losses) == 4 and losses[-1] < losses[0] * 0.8, losses
    assert f"[rank 0] checkpoint written to {checkpoint}" in out
    assert checkpoint.is_file()


# heavy (make test-heavy): cpu-bookworm-tf-pt compiles Horovod against TensorFlow and PyTorch,
# about 11 minutes of .ci/run's 2 cores
@pytest.mark.heavy
def test_two_node_pytorch_training_from_the_tensorflow_and_pytorch_image(
    cluster: None,
    tf_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """The PyTorch example from the SIF that also trains the Keras one (next test)."""
    checkpoint = job_dir / "tf-pt" / "model.pt"
    result = _train(checkpoint=checkpoint, image=tf_sif, cwd=job_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    _check_training(result.stdout, "mpi", checkpoint)


# heavy (make test-heavy): cpu-bookworm-tf-pt compiles Horovod against TensorFlow and PyTorch,
# about 11 minutes of .ci/run's 2 cores
@pytest.mark.heavy
def test_two_node_keras_training(
    cluster: None,
    tf_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """The TensorFlow/Keras example (the five Horovod steps) over MPI on both nodes."""
    checkpoint = job_dir / "keras" / "model.keras"
    result = cli(
        "run", "--site", "local", "--image", str(tf_sif), "-N", "2", "--ntasks-per-node", "1",
        str(ROOT / "examples" / "tensorflow_keras_synthetic.py"), "--epochs", "4",
        "--checkpoint", str(checkpoint), cwd=job_dir, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    _check_training(out, None, checkpoint)
    # the mean over ranks is an allreduce: both ranks print the same value each epoch
    means = re.findall(r"^\[rank (\d)\] epoch (\d+) .*mean over ranks ([0-9.]+)", out, re.M)
    by_epoch: dict[str, set[str]] = {}
    for _, epoch, mean in means:
        by_epoch.setdefault(epoch, set()).add(mean)
    assert len(by_epoch) == 4 and all(len(v) == 1 for v in by_epoch.values()), means
