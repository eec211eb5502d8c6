"""Helpers for launch tests: an environment with no user config, cache or Slurm of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hvd_container.launcher.report import Reporter

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "launch"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

_VARS = ("HVD_CONTAINER_SITE", "SLURM_CLUSTER_NAME", "SLURM_JOB_ID", "XDG_CONFIG_HOME")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """XDG dirs in tmp_path, no site env vars, a slurm.conf that names no cluster (empty: a
    Slurm tool installed here then fails at once; a missing one it retries for 60 s)."""
    for var in _VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "empty-slurm.conf").write_text("")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "empty-slurm.conf"))
    monkeypatch.setattr("hvd_container.launcher.sites.loader.SLURM_CONF_PATHS", ())
    yield tmp_path


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs: run with UPDATE_GOLDEN=1 and review the diff"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# The working directory runtimes that mount nothing on their own (ch-run, podman-hpc) bind in:
# the same in every golden line, wherever the tests run.
JOB_DIR = "/home/u/job"


@pytest.fixture
def job_dir(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr("hvd_container.launcher.runtimes.working_directory", lambda: JOB_DIR)
    monkeypatch.setenv("USER", "u")
    return JOB_DIR


def plan_launch(site: Any, request: Any, mode: str = "run") -> Any:
    """The launch as a dry run plans it (what `run --dry-run` prints)."""
    from hvd_container.launcher.plan.planner import plan

    return plan(site, request, mode, dry_run=True)  # type: ignore[arg-type]


def compose_srun(site: Any, request: Any) -> list[str]:
    return words(plan_launch(site, request))


def words(launch: Any) -> list[str]:
    """The words of the launch: the allocation's options and the srun step (outside an
    allocation these are the script's #SBATCH options and its srun line; inside one, the step)."""
    return [*launch.allocation, *launch.step]


class Said(Reporter):
    """A reporter that keeps the status lines it was given, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def status(self, line: str) -> None:
        self.lines.append(line)
