"""`run --hang-after` for real: two ranks on two nodes of the local cluster, one stuck before an
all-reduce while the other waits in it. The silence is noticed, each rank's Python stack shows
where it is, --cancel-on-hang ends the job and `run` exits 124."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    job_dir,
    slurm_cluster,
    torch_sif,
)

pytestmark = pytest.mark.e2e

STUCK = """\
import threading

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
print(f"rank {rank} ready", flush=True)


def stuck_before_allreduce():
    threading.Event().wait()


if rank == 0:
    stuck_before_allreduce()
total = torch.ones(1)
dist.all_reduce(total)
print("never here", total)
"""


def test_a_stuck_rank_is_noticed_its_stacks_shown_and_the_job_ended(
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    torch_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    (job_dir / "stuck.py").write_text(STUCK)
    started = time.monotonic()
    result = cli(
        "run", "--site", "local", "--image", str(torch_sif), "--controller", "torch",
        "-N", "2", "--ntasks-per-node", "1", "-J", "hang-test", "--hang-after", "20s",
        "--cancel-on-hang", "stuck.py", cwd=job_dir, timeout=600,
    )  # fmt: skip
    took = time.monotonic() - started
    said = result.stdout + result.stderr
    assert result.returncode == 124, said
    assert "rank 0 ready" in said and "rank 1 ready" in said and "never here" not in said
    found = re.search(r"job (\d+): no output for (\d+)s \(--hang-after 20s\)", said)
    assert found, said
    assert 20 <= int(found[2]) <= 25, said  # noticed within the limit (polls are 0.5 s)
    # each rank's stack, under its own header, where it waits
    blocks = re.split(r"^hvd-container stacks: ", said, flags=re.MULTILINE)[1:]
    by_rank = {b.split(",", 1)[0]: b for b in blocks}
    assert set(by_rank) == {"rank 0", "rank 1"}, said
    assert "in stuck_before_allreduce" in by_rank["rank 0"], by_rank["rank 0"]
    assert "in all_reduce" in by_rank["rank 1"], by_rank["rank 1"]
    assert "2 Python processes wrote their stacks" in said, said
    assert f"ending job {found[1]} (--cancel-on-hang)" in said, said
    state = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", found[1], "--format=State"],
        capture_output=True, text=True,
    ).stdout  # fmt: skip
    shown = subprocess.run(
        ["scontrol", "show", "job", found[1]], capture_output=True, text=True
    ).stdout
    assert "CANCELLED" in state + shown, state + shown
    assert took < 240, took  # not the job's time limit
