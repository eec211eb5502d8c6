"""A run that restarts, for real on the local cluster (`run --until-done`: the job's line is
this tool's step loop): a hang is restarted once and the run finishes; a SyntaxError is not
restarted; a script that raises at every third epoch stops after --max-restarts; on four nodes,
three training and one spare, a node that crashes mid-run (every process of it killed, slurmd
too) is screened for, excluded and replaced by the spare, and the training ends with the
weights of the same training run without the fault."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.sif_fixtures import ROOT, run_testbed
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    cpu_sif,
    job_dir,
    slurm_cluster,
    torch_sif,
)
from tests.e2e.test_until_done import _tensors

pytestmark = pytest.mark.e2e

# epochs of nothing, each ended by a checkpoint (a JSON file) and its $HVD_PROGRESS line;
# resumes after the last; FAULT: "hang-once" hangs after epoch 2 the first time, "raise-3"
# raises after every third epoch's checkpoint
EPOCHS = """\
import json, os, sys, threading, time
state = "state.json"
first = json.load(open(state))["epoch"] + 1 if os.path.exists(state) else 1
print(f"resumed after epoch {first - 1}", flush=True)
for epoch in range(first, 8):
    time.sleep(0.5)
    json.dump({"epoch": epoch}, open(state, "w"))
    with open(os.environ["HVD_PROGRESS"], "a") as fh:
        fh.write(f"state.json epoch {epoch}\\n")
    print(f"epoch {epoch} done", flush=True)
    fault = sys.argv[1]
    if fault == "hang-once" and epoch == 2 and not os.path.exists("hung"):
        open("hung", "w").close()
        threading.Event().wait()
    if fault == "raise-3" and epoch % 3 == 0:
        raise RuntimeError(f"planned failure after epoch {epoch}")
print("finished", flush=True)
"""

LAUNCH = ["run", "--site", "local", "-N", "1", "--ntasks-per-node", "1", "--controller", "torch",
          "--until-done", "--time", "10"]  # fmt: skip


def test_a_hang_is_restarted_once_and_the_run_finishes(
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    torch_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    (job_dir / "epochs.py").write_text(EPOCHS)
    done = cli(*LAUNCH, "--image", str(torch_sif), "--hang-after", "15s", "epochs.py",
               "hang-once", cwd=job_dir, timeout=600)  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert re.search(r"no output for 1[5-9]s \(--hang-after 15s\)", said), said
    assert "hvd-container stacks: " in said and "in <module>" in said, said
    assert "step 1 ended: hung after" in said, said
    assert "resumed after epoch 2" in said and "finished" in said, said
    assert re.search(r"run done: 2 steps, 1 restarts \(1 hang\), \d+", said), said


def test_a_syntax_error_is_not_restarted(
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    torch_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    (job_dir / "broken.py").write_text("print('never'\n")
    done = cli(*LAUNCH, "--image", str(torch_sif), "broken.py", cwd=job_dir, timeout=600)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "not worth a retry: SyntaxError" in said and "comes again at every start" in said, said
    assert "step 2 on" not in said and "run stopped: 1 step" in said, said


def test_a_script_that_raises_at_every_third_epoch_stops_after_max_restarts(
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    torch_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    (job_dir / "epochs.py").write_text(EPOCHS)
    done = cli(*LAUNCH, "--image", str(torch_sif), "--max-restarts", "1", "epochs.py",
               "raise-3", cwd=job_dir, timeout=600)  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "planned failure after epoch 3" in said and "planned failure after epoch 6" in said
    assert "resumed after epoch 3" in said and "finished" not in said, said
    assert "1 restarts already (--max-restarts 1)" in said, said
    assert re.search(r"run stopped: 2 steps, 1 restarts \(1 script\)", said), said


NODES = 4


@pytest.fixture()
def four_nodes(slurm_cluster: str) -> Iterator[None]:  # noqa: F811
    run_testbed("slurm.sh", "up", "--nodes", str(NODES))
    try:
        yield
    finally:
        run_testbed("slurm.sh", "up")  # the 2-node cluster the other tests expect


def test_a_node_lost_mid_run_is_replaced_by_the_spare_with_the_same_weights(
    four_nodes: None,
    charliecloud_runtime: None,  # noqa: F811
    cpu_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """The Horovod example (deterministic on the CPU, as test_until_done.py shows; DDP's is
    not bit for bit across a resume: its first step after one allreduces in its first bucket
    order, not the order it rebuilt, and the sums' order differs)."""
    example = str(ROOT / "examples" / "pytorch_synthetic.py")
    train = ["--epochs", "6", "--samples", "6144", "--seed", "3"]
    launch = [sys.executable, "-m", "hvd_container", "run", "--site", "local", "--image",
              str(cpu_sif), "-N", "3", "--ntasks-per-node", "1"]  # fmt: skip
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.Popen(
        [*launch, "--until-done", "--time", "20", "--spare-nodes", "1", example, *train,
         "--checkpoint", str(job_dir / "faulted" / "model.pt")],
        cwd=job_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    crashed: list[str] = []

    def crash_rank_2s_node_after_epoch_2() -> None:
        assert proc.stdout is not None
        hosts: dict[str, str] = {}
        for line in proc.stdout:
            lines.append(line)
            found = re.match(r"\[rank (\d)\] .*initialised: .* host (node\d)", line)
            if found:
                hosts[found[1]] = found[2]
            if not crashed and line.startswith("[rank 0] epoch 2 loss") and "2" in hosts:
                crashed.append(hosts["2"])
                run_testbed("slurm.sh", "crash", hosts["2"])

    reader = threading.Thread(target=crash_rank_2s_node_after_epoch_2, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=900)
    finally:
        proc.kill()
    reader.join(timeout=30)
    said = "".join(lines)
    assert proc.returncode == 0, said
    assert crashed, said
    lost = crashed[0]
    assert f"{lost} down" in said, said
    assert re.search(rf"step 1 ended: a node lost after .*{lost}", said), said
    step_2 = re.search(r"step 2 on (node\d), (node\d), (node\d)", said)
    assert step_2 and lost not in step_2.groups() and len(set(step_2.groups())) == 3, said
    assert re.search(r"\[rank 0\] resumed from \S+ after epoch [12]", said), said
    assert re.search(r"run done: 2 steps, 1 restarts \(1 node\), \d+", said), said
    # what it cost, from the job's record
    job = re.search(r"submitted batch job (\d+)", said)
    assert job, said
    shown = cli("jobs", "show", job[1], cwd=job_dir)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    first, second, total = shown.stdout.splitlines()
    assert f"node lost: {lost}; lost " in first and "resumed from " in second, shown.stdout
    assert second.endswith(
        ", done; resumed from " + str(job_dir / "faulted" / "model.pt") + " epoch 2"
    ) or (" epoch 1" in second), shown.stdout
    assert re.fullmatch(r"2 steps, 1 restarts, (\d+m )?\d+s lost; the last: done", total), total

    # the same training without the fault (on the three nodes left): the same weights
    once = subprocess.run(
        [*launch, example, *train, "--checkpoint", str(job_dir / "reference" / "model.pt")],
        cwd=job_dir, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert once.returncode == 0, once.stdout + once.stderr
    mine = _tensors(job_dir / "faulted" / "model.pt")
    theirs = _tensors(job_dir / "reference" / "model.pt")
    assert mine.keys() == theirs.keys() and len(mine) > 2
    assert mine == theirs
