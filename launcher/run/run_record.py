"""What a run that restarts cost, kept for `jobs show JOB`: each job's steps in the working
directory's .hvd-container/runs/JOB.json (written whole after each step), linked to the job
before it (a next segment names it in HVD_PREVIOUS_JOB), read back as one run's segments."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from hvd_container.launcher.run.restarts import StepEnd, step_lost
from hvd_container.launcher.runtimes import TOOL_FOLDER, working_directory
from hvd_container.launcher.script.batch import PREVIOUS_JOB

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import UserError
from hvd_container.core.text import ascii_digits

RUNS_FOLDER = "runs"  # in the working directory's .hvd-container

_WHY_WORDS = {
    "done": "done",
    "time": "the time limit",
    "hang": "a hang",
    "node": "node lost",
    "script": "script error",
}


def runs_folder() -> Path:
    """The working directory's record folder (it may not exist: nothing recorded here)."""
    return Path(working_directory()) / TOOL_FOLDER / RUNS_FOLDER


def previous_job() -> str | None:
    value = os.environ.get(PREVIOUS_JOB, "")
    return value if ascii_digits(value) else None


def write_record(folder: Path, job: str, segment: int, ends: list[StepEnd]) -> None:
    """The job's record: its segment, the job before it, and its steps so far (a requeued
    job's earlier segments' steps stay in front of them)."""
    path = folder / f"{job}.json"
    earlier: list[dict[str, object]] = []
    if segment > 0 and path.is_file():  # requeued: the same job, a later segment
        earlier = [s for s in _read(path).get("steps", []) if s.get("segment") != segment]
    steps = [*earlier, *({**e.to_record(), "segment": segment} for e in ends)]
    record = {"job": job, "previous": previous_job(), "steps": steps}
    write_text(path, json.dumps(record, indent=1) + "\n", mode=0o600)


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class Segment:
    """One step of a run, as `jobs show` lists it."""

    job: str
    step: int  # within its job, from 1
    segment: int
    nodes: list[str]
    started: float
    ended: float
    why: str
    lost_nodes: list[str]
    detail: str
    resumed_from: str | None  # the checkpoint the step before it last wrote
    lost: float  # seconds: from its last checkpoint to its end, and on to the next step

    def to_record(self) -> dict[str, object]:
        return {
            "job": self.job, "step": self.step, "segment": self.segment, "nodes": self.nodes,
            "started": self.started, "ended": self.ended, "why": self.why,
            "lost_nodes": self.lost_nodes, "detail": self.detail,
            "resumed_from": self.resumed_from, "lost_seconds": round(self.lost, 1),
        }  # fmt: skip


def run_of(job: str, folder: Path) -> list[Segment]:
    """The steps of the run job `job` is part of, first to last (UserError when it left no
    record here)."""
    if not ascii_digits(job):
        raise UserError(f"JOBID: {job!r} is not a job id (allowed: digits)")
    records = {p.stem: _read(p) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}
    if job not in records:
        raise UserError(
            f"job {job}: no record of a run that restarts in {folder} (run `jobs show` in the "
            "folder the run started from; only --until-done and --max-restarts runs keep one)"
        )
    chain = [job]
    while (before := records.get(chain[0], {}).get("previous")) in records and before not in chain:
        chain.insert(0, before)
    after = {r.get("previous"): name for name, r in records.items()}
    while (following := after.get(chain[-1])) is not None and following not in chain:
        chain.append(following)
    steps = [
        (name, n, s) for name in chain for n, s in enumerate(records[name].get("steps", []), 1)
    ]
    out: list[Segment] = []
    for i, (name, n, step) in enumerate(steps):
        following_step = steps[i + 1][2] if i + 1 < len(steps) else None
        before_step = steps[i - 1][2] if i else None
        started, ended = float(step.get("started", 0)), float(step.get("ended", 0))
        lost = 0.0
        if following_step is not None:
            lost = step_lost(
                str(step.get("why")), started, ended, float(step.get("progress_at") or 0),
                float(following_step.get("started", 0)),
            )  # fmt: skip
        out.append(
            Segment(
                job=name, step=n, segment=int(step.get("segment", 0)),
                nodes=list(step.get("nodes", [])), started=started, ended=ended,
                why=str(step.get("why", "?")), lost_nodes=list(step.get("lost", [])),
                detail=str(step.get("detail", "")),
                resumed_from=before_step.get("checkpoint") if before_step else None, lost=lost,
            )
        )  # fmt: skip
    return out


def why_words(segment: Segment) -> str:
    said = _WHY_WORDS.get(segment.why, segment.why)
    if segment.why == "node" and segment.lost_nodes:
        return f"{said}: {', '.join(segment.lost_nodes)}"
    if segment.why == "script" and segment.detail:
        return f"{said}: {segment.detail}"
    return said
