"""--until-done on the local cluster: a Horovod training (the example, fixed seed, CPU) whose
job's time limit (1 minute) is far shorter than the training goes on in chained segments,
each a job that depends on the last (the local profile does not requeue), with no command
typed after the first; its final weights equal, bit for bit, those of the same training run
at once without a limit (CPU, fixed seed, the data order set by the epoch: deterministic).
A Lightning training goes on the same way, its job requeued once per segment: Lightning's own
`scontrol requeue` fails inside the container (no scontrol there), so the job script does it.
One rank: Lightning writes its checkpoint inside its signal handler, a barrier across the ranks,
which with Gloo (CPU) can meet a rank inside another collective and hang (seen here with two);
the job script then ends the step after its checkpoint time and the segment goes on from the
checkpoint before."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.e2e.sif_fixtures import ROOT
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    cpu_sif,
    job_dir,
    lightning_packages,
    lightning_run,
    slurm_cluster,
)

pytestmark = pytest.mark.e2e

EXAMPLE = ROOT / "examples" / "pytorch_synthetic.py"
LIGHTNING = ROOT / "examples" / "lightning_synthetic.py"
# The Lightning example with every epoch at least 3 s long, however fast the machine: 20 epochs
# then outlast a one-minute segment (on a machine that trains an epoch in 1.5 s, the whole
# training once fitted between Slurm's warning and the end of the grace: one segment)
PACED_LIGHTNING = """\
import time

import lightning.pytorch as pl  # the import the tool reads the controller from
import lightning_synthetic as example


class Paced(example.Classifier):
    def on_train_epoch_start(self) -> None:
        self.began = time.monotonic()

    def on_train_epoch_end(self) -> None:
        super().on_train_epoch_end()
        time.sleep(max(0.0, 3.0 - (time.monotonic() - getattr(self, "began", 0.0))))


assert issubclass(Paced, pl.LightningModule)
example.Classifier = Paced
example.main()
"""
# about a minute and a half of training on two nodes of this machine: more than the limit
TRAIN = ["--epochs", "12", "--samples", "16384", "--seed", "7"]
# One rank trains one epoch; from the moment it says it is done until it has exited, it is sent
# USR1 (Slurm's warning, as the job passes it on) over and over: then its exit
WARNED_AS_IT_EXITS = """\
python /ex/ddp_synthetic.py --epochs 1 --samples 256 --checkpoint /tmp/c.pt > /tmp/said 2>&1 &
rank=$!
until grep -q 'done:' /tmp/said; do kill -0 $rank 2>/dev/null || break; sleep 0.05; done
while kill -USR1 $rank 2>/dev/null; do :; done
wait $rank; echo "exit $?"; cat /tmp/said
"""


def _tensors(checkpoint: Path) -> dict[str, bytes]:
    """The tensors' bytes of a torch checkpoint (its zip archive's data/ records); the
    archive's serialization id differs from save to save, the tensors do not."""
    with zipfile.ZipFile(checkpoint) as archive:
        return {
            name.split("/", 1)[1]: archive.read(name)
            for name in archive.namelist()
            if "/data/" in name or name.endswith("/data.pkl")
        }


def test_a_training_past_its_time_limit_finishes_in_segments_with_the_same_weights(
    cpu_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
) -> None:
    launch = ["run", "--site", "local", "--image", str(cpu_sif), "-N", "2",
              "--ntasks-per-node", "1"]  # fmt: skip
    segmented = job_dir / "segments" / "model.pt"
    result = cli(
        *launch, "--until-done", "--time", "1", "--grace", "20s", "--max-restarts", "20",
        str(EXAMPLE), *TRAIN, "--checkpoint", str(segmented), cwd=job_dir, timeout=1500,
    )  # fmt: skip
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    handed = re.findall(r"goes on as job (\d+) \(--until-done\)", said)
    assert handed, said  # at least two segments
    assert len(
        re.findall(r"\[rank 0\] stopping after epoch \d+: the time limit is near", said)
    ) == len(handed)
    resumed = [int(e) for e in re.findall(r"\[rank 0\] resumed from \S+ after epoch (\d+)", said)]
    assert len(resumed) == len(handed) and resumed == sorted(resumed), said
    assert re.search(r"^\[rank 0\] epoch 12 loss ", said, re.M), said

    reference = job_dir / "reference" / "model.pt"
    once = cli(*launch, str(EXAMPLE), *TRAIN, "--checkpoint", str(reference), cwd=job_dir,
               timeout=900)  # fmt: skip
    assert once.returncode == 0, once.stdout + once.stderr
    mine, theirs = _tensors(segmented), _tensors(reference)
    assert mine.keys() == theirs.keys() and len(mine) > 2
    assert mine == theirs  # bit for bit


def test_a_warning_that_comes_as_a_finished_training_exits_is_ignored(
    torch_image: str,
) -> None:
    """The examples' side of the contract: once its epochs are over, a rank ignores the warning,
    so a training that finishes just as Slurm warns exits 0 and its run ends. A handler alone
    is not enough: Python puts a signal's default action back as it exits, USR1's ends the
    process, and the run took that for a segment cut by the time limit and went on in one more
    job with nothing left to train (the test above once saw three jobs handed on for two stops)."""
    done = subprocess.run(
        ["docker", "run", "--rm", "-v", f"{EXAMPLE.parent}:/ex:ro",
         "-e", "HVD_CHECKPOINT_SIGNAL=USR1", "-e", "RANK=0", "-e", "WORLD_SIZE=1",
         "-e", "MASTER_ADDR=127.0.0.1", "-e", "MASTER_PORT=29500",
         "--entrypoint", "sh", torch_image, "-c", WARNED_AS_IT_EXITS],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert re.search(r"^\[rank 0\] done: \d+ steps", said, re.M), said
    assert re.search(r"^exit 0$", said, re.M), said  # not 138: ended by USR1


def test_a_lightning_training_past_its_time_limit_goes_on_once_per_segment(
    cpu_sif: Path,  # noqa: F811
    lightning_packages: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
) -> None:
    checkpoint = job_dir / "lightning.ckpt"
    for example in (LIGHTNING, LIGHTNING.with_name("_synthetic.py")):
        shutil.copy(example, job_dir)
    paced = job_dir / "paced_lightning.py"
    paced.write_text(PACED_LIGHTNING)
    result = cli(
        *lightning_run(cpu_sif, lightning_packages, nodes=1),
        # Slurm warns a segment 10 to 40 s in and it keeps what it had then: 20 epochs of at
        # least 3 s make 3 to 8 segments, never one
        "--until-done", "--time", "1", "--grace", "20s", "--max-restarts", "12",
        str(paced), "--epochs", "20", "--samples", "65536", "--checkpoint", str(checkpoint),
        cwd=job_dir, timeout=1500,
    )  # fmt: skip
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    handed = re.findall(r"goes on as job (\d+) \(--until-done\)", said)
    assert handed, said  # at least two segments
    assert len(set(handed)) == len(handed), handed  # each segment one next job
    # each segment: Lightning took the warning, wrote its hpc checkpoint and tried its own
    # requeue, which failed in the container; the script went on once, a job of its own (the
    # last segment may be warned too, and finish within its grace)
    warned = len(re.findall(r"Handling auto-requeue signal", said))
    assert warned in (len(handed), len(handed) + 1), said
    assert len(re.findall(r"Requeuing SLURM job \d+ failed", said)) == warned, said
    gone_on = re.findall(r"the program did not requeue its job: this script goes on", said)
    assert len(gone_on) == len(handed), said
    resumed = re.findall(r"^\[rank 0\] resumed at epoch (\d+)", said, re.M)
    assert len(resumed) == len(handed) and resumed == sorted(resumed, key=int), said
    assert not re.search(r"^Requeued SLURM job: \d+", said, re.M), said  # Lightning's own success
    losses = [float(x) for x in re.findall(r"^\[rank 0\] epoch \d+ loss ([0-9.]+)", said, re.M)]
    assert len(losses) >= 20 and losses[-1] < losses[0] * 0.8, losses
    assert re.search(r"^\[rank 0\] epoch 20 loss ", said, re.M), said
    assert f"[rank 0] checkpoint written to {checkpoint}" in said and checkpoint.is_file()
    assert len(list(job_dir.glob("hpc_ckpt_*.ckpt"))) == warned
