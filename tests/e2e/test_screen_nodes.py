"""`--screen` for real, on five nodes of the local cluster with three faults made for real:
node3's link slowed (a token bucket on its veth, both ways: this kernel has no netem), node4's
container path broken (its slurmd runs in a mount namespace where ch-run is /bin/false), node5
down (every process of its namespace killed once the allocation holds it; `salloc --no-kill`
keeps the allocation when Slurm counts it down). `doctor --screen --json` names each and why and
writes the exclude list; `run --screen --screen-policy shrink` then trains DDP on the two good
nodes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.sif_fixtures import ROOT, run_testbed
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    job_dir,
    slurm_cluster,
    torch_sif,
)

pytestmark = pytest.mark.e2e

NODES = 5
SLOW, BROKEN, DOWN = "node3", "node4", "node5"


@pytest.fixture()
def faulty_cluster(slurm_cluster: str) -> Iterator[None]:  # noqa: F811
    run_testbed("slurm.sh", "up", "--nodes", str(NODES))
    try:
        run_testbed("slurm.sh", "slow", SLOW, "400mbit")
        run_testbed("slurm.sh", "break-runtime", BROKEN)
        # each fault on its own node: a counter of the testbed's once gave node3 node4's broken
        # ch-run (its slurmd restarted under node3's name), and the slow node was judged broken
        assert _chrun_is_false(BROKEN) and not _chrun_is_false(SLOW)
        yield
    finally:
        for node in (SLOW, BROKEN):
            subprocess.run(["sh", str(ROOT / "testbed" / "slurm.sh"), "mend", node], check=False)
        run_testbed("slurm.sh", "up")  # the 2-node cluster the other tests expect


def _chrun_is_false(node: str) -> bool:
    """Whether a job on `node` finds /bin/false where ch-run is."""
    done = subprocess.run(
        ["srun", "-N1", f"--nodelist={node}", "--quiet", "sh", "-c",
         'cmp -s "$(command -v ch-run)" /bin/false && echo false || echo ch-run'],
        env={k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip() == "false"


def test_the_three_faults_are_named_excluded_and_the_job_trains_on_the_rest(
    faulty_cluster: None,
    charliecloud_runtime: None,  # noqa: F811
    torch_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    hvd = f"{sys.executable} -m hvd_container"
    image = f"--site local --image {torch_sif} --controller torch"
    inside = (
        f"sh {ROOT / 'testbed' / 'slurm.sh'} crash {DOWN} >&2 && "
        f"{hvd} doctor {image} --screen --exclude-file screen.exclude --json > doctor.json; "
        f"echo doctor-exit=$? >&2; "
        f"{hvd} run {image} --screen --screen-policy shrink "
        f"{ROOT / 'examples' / 'ddp_synthetic.py'} --epochs 1 --samples 512 --checkpoint ck.pt"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        ["salloc", "-N", str(NODES), "--no-kill", "--quiet", "sh", "-c", inside],
        cwd=job_dir, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert "doctor-exit=1" in done.stderr, said  # doctor fails a screen with bad nodes

    record = json.loads((job_dir / "doctor.json").read_text().splitlines()[-1])
    screen = record["screen"]
    verdicts = {v["node"]: v for v in screen["verdicts"]}
    assert verdicts[SLOW]["status"] == "slow", verdicts[SLOW]
    assert re.match(r"best pair \d+ MB/s, below \d+ MB/s", verdicts[SLOW]["why"])
    assert verdicts[BROKEN]["status"] == "broken", screen
    assert verdicts[BROKEN]["why"].startswith("the container did not start a rank")
    assert verdicts[DOWN]["status"] == "down", screen
    assert sorted(screen["exclude"]) == [SLOW, BROKEN, DOWN]
    assert screen["good"] == ["node1", "node2"]
    assert sorted((job_dir / "screen.exclude").read_text().split()) == [SLOW, BROKEN, DOWN]
    slow_pairs = [p for p in screen["pairs"] if SLOW in p["nodes"]]
    fast_pairs = [p for p in screen["pairs"] if SLOW not in p["nodes"]]
    assert slow_pairs and fast_pairs
    assert max(p["busbw"] for p in slow_pairs) < min(p["busbw"] for p in fast_pairs) / 2

    # run --screen: the same verdicts, then the training on node1 and node2 only
    assert done.returncode == 0, said
    assert f"without {SLOW},{BROKEN},{DOWN}" in done.stderr or all(
        n in done.stderr for n in (SLOW, BROKEN, DOWN)
    ), said
    assert "running on 2 of the 5 nodes asked for" in done.stderr, said
    hosts = set(re.findall(r"^\[rank \d\] .*initialised: .* host (node\d)", done.stdout, re.M))
    assert hosts == {"node1", "node2"}, said
    assert re.search(r"^\[rank 0\] done: \d+ steps", done.stdout, re.M), said


def test_a_batch_job_screens_its_own_nodes_and_trains_on_the_good_ones(
    faulty_cluster: None,
    charliecloud_runtime: None,  # noqa: F811
    torch_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """`batch --screen --submit` outside any allocation: the job's line is this tool's `run
    --screen`, which screens the job's five nodes and trains on the three good ones."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "hvd_container", "batch", "--submit", "--site", "local",
         "--image", str(torch_sif), "--controller", "torch", "-N", str(NODES), "--screen",
         "--screen-policy", "shrink", str(ROOT / "examples" / "ddp_synthetic.py"),
         "--epochs", "1", "--samples", "512", "--checkpoint", "ck.pt"],
        cwd=job_dir, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "running on 3 of the 5 nodes asked for" in said, said
    hosts = set(re.findall(r"^\[rank \d\] .*initialised: .* host (node\d)", said, re.M))
    assert hosts == {"node1", "node2", "node5"}, said
    assert (job_dir / "ck.pt").is_file()
