"""The local multi-node Slurm cluster of testbed/slurm.sh, exercised with the real commands."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.sif_fixtures import ROOT, run_testbed
from tests.e2e.slurm_fixtures import slurm_cluster  # noqa: F401

pytestmark = pytest.mark.e2e

RUN_DIR = Path("/run/hvd-testbed/slurm")


def test_srun_runs_tasks_on_both_nodes(slurm_cluster: str) -> None:  # noqa: F811
    out = subprocess.run(
        ["srun", "-N", "2", "--ntasks-per-node=2", "hostname"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    assert sorted(out) == ["node1", "node1", "node2", "node2"]


def test_each_node_has_its_own_address(slurm_cluster: str) -> None:  # noqa: F811
    out = subprocess.run(
        ["srun", "-N", "2", "--ntasks-per-node=1", "-l", "cat", "/proc/net/fib_trie"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert "10.213.7.11" in out and "10.213.7.12" in out


def test_srun_offers_pmix(slurm_cluster: str) -> None:  # noqa: F811
    out = subprocess.run(["srun", "--mpi=list"], capture_output=True, text=True).stdout
    out += subprocess.run(["srun", "--mpi=list"], capture_output=True, text=True).stderr
    assert "pmix" in out


def test_up_again_is_quick_and_keeps_the_daemons(slurm_cluster: str) -> None:  # noqa: F811
    before = {p.name: p.read_text() for p in RUN_DIR.glob("*.pid")}
    start = time.monotonic()
    run_testbed("slurm.sh", "up")
    assert time.monotonic() - start < 10
    after = {p.name: p.read_text() for p in RUN_DIR.glob("*.pid")}
    assert before == after and "slurmctld.pid" in after


def test_status_reports_every_node(slurm_cluster: str) -> None:  # noqa: F811
    proc = subprocess.run(
        ["sh", str(ROOT / "testbed" / "slurm.sh"), "status"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "node1 idle" in proc.stdout and "node2 idle" in proc.stdout


def test_down_then_up_comes_back_within_a_minute(slurm_cluster: str) -> None:  # noqa: F811
    run_testbed("slurm.sh", "down")
    assert not list(RUN_DIR.glob("slurmd-*.pid"))
    links = subprocess.run(["ip", "link"], capture_output=True, text=True).stdout
    assert "hvdslurm0" not in links
    start = time.monotonic()
    run_testbed("slurm.sh", "up")
    out = subprocess.run(
        ["srun", "-N", "2", "hostname"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert time.monotonic() - start < 60
    assert sorted(out) == ["node1", "node2"]
