"""What a run that restarts cost (launcher/run/run_record.py): each job's record of its steps, read
back across segments by `jobs show JOB` (and --json, checked against its documented schema)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _json_records import result
from hvd_container.launcher.run.restarts import StepEnd
from hvd_container.launcher.run.run_record import run_of, write_record

from hvd_container.cli.app import main
from hvd_container.core.errors import UserError


def _end(why: str, started: float, ended: float, **more: object) -> StepEnd:
    return StepEnd(exit_code=0 if why == "done" else 1, why=why, started=started, ended=ended,
                   nodes=("n1", "n2"), **more)  # type: ignore[arg-type]  # fmt: skip


def _two_jobs(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Job 10: a node lost at 100 s (its checkpoint at 70 s), the step again from 110 s to the
    time limit at 300 s; job 11, the next segment from 400 s, done at 500 s."""
    folder.mkdir(parents=True)
    monkeypatch.delenv("HVD_PREVIOUS_JOB", raising=False)
    lost = _end("node", 0, 100, lost=("n2",), detail="n2 down: gone",
                progress=("ck.pt epoch 3",), progress_at=70.0)  # fmt: skip
    limit = _end("time", 110, 300, progress=("ck.pt epoch 7",), progress_at=299.0)
    write_record(folder, "10", 0, [lost])
    write_record(folder, "10", 0, [lost, limit])
    monkeypatch.setenv("HVD_PREVIOUS_JOB", "10")
    write_record(folder, "11", 1, [_end("done", 400, 500)])


def test_a_run_s_steps_are_read_back_from_any_of_its_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "runs"
    _two_jobs(folder, monkeypatch)
    for job in ("10", "11"):
        steps = run_of(job, folder)
        assert [(s.job, s.step, s.segment, s.why) for s in steps] == [
            ("10", 1, 0, "node"), ("10", 2, 0, "time"), ("11", 1, 1, "done"),
        ]  # fmt: skip
    first, second, third = run_of("11", folder)
    assert first.lost_nodes == ["n2"] and first.lost == pytest.approx(30 + 10)
    assert second.resumed_from == "ck.pt epoch 3" and second.lost == pytest.approx(100)  # the wait
    assert third.resumed_from == "ck.pt epoch 7" and third.lost == 0.0


def test_a_requeued_job_keeps_its_earlier_segments_steps(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    write_record(folder, "7", 0, [_end("time", 0, 10)])
    write_record(folder, "7", 1, [_end("done", 20, 30)])
    assert [(s.segment, s.why) for s in run_of("7", folder)] == [(0, "time"), (1, "done")]


def test_a_job_without_a_record_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="job 5: no record of a run that restarts"):
        run_of("5", tmp_path)
    with pytest.raises(UserError, match="is not a job id"):
        run_of("5;x", tmp_path)


def test_jobs_show_lists_the_steps_and_the_time_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _two_jobs(tmp_path / ".hvd-container" / "runs", monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["jobs", "show", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("job 10 step 1 (segment 0) on n1,n2: ")
    assert lines[0].endswith("node lost: n2; lost 40s")
    assert lines[1].endswith("the time limit; resumed from ck.pt epoch 3; lost 1m 40s")
    assert lines[2].endswith("done; resumed from ck.pt epoch 7")
    assert lines[3] == "3 steps, 2 restarts, 2m 20s lost; the last: done"
    assert main(["jobs", "show", "11", "--json"]) == 0
    record = result("jobs-show", capsys.readouterr().out)
    assert record["lost_seconds"] == 140.0 and len(record["steps"]) == 3
    assert json.dumps(record["steps"][0]["lost_nodes"]) == '["n2"]'
