"""--hang-after: the duration, the watcher loaded in a real Python process, and what `run`
does when the output stops (HangWatch on a clock of its own)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _launch_helpers import Said, plan_launch
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.run.hang import (
    HEADER,
    WATCHER,
    HangWatch,
    ask_for_stacks,
    parse_duration,
    watcher_env,
    watcher_files,
)
from hvd_container.launcher.sites.loader import load_site

from hvd_container.core.errors import UserError


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("10m", 600), ("1h", 3600), ("1h30m", 5400), ("2m5s", 125)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["10", "", "m", "10 m", "1d", "0s", "１０m", "-5m", "10m1h"])
def test_a_bad_duration_names_the_flag_and_the_forms(text: str) -> None:
    with pytest.raises(UserError, match=r"^--hang-after: .*(90s, 10m, 1h|at least 1s)"):
        parse_duration(text)


def test_the_watcher_goes_first_on_the_path_and_keeps_a_given_one(tmp_path: Path) -> None:
    added = watcher_env(tmp_path, {"PYTHONPATH": "/mine"})
    assert added == {
        "HVD_CONTAINER_STACKS": str(tmp_path),
        "PYTHONPATH": f"{tmp_path}:/mine",
        "PYTHONUNBUFFERED": "1",
    }
    assert "PYTHONUNBUFFERED" not in watcher_env(tmp_path, {"PYTHONUNBUFFERED": "0"})
    # the user's `export PYTHONPATH=...` reaches the ranks without --hang-after: with it too
    assert watcher_env(tmp_path, {}, "/site")["PYTHONPATH"] == f"{tmp_path}:/site"
    assert watcher_env(tmp_path, {"PYTHONPATH": "/mine"}, "/site")["PYTHONPATH"] == (
        f"{tmp_path}:/mine"
    )


def test_a_planned_watch_keeps_the_exported_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from _launch_helpers import plan_launch
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.loader import load_site

    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "mylib"))
    launch = plan_launch(
        load_site("local"),
        LaunchRequest(script="t.py", image="x.sqfs", ntasks=1, hang_after=60, controller="torch"),
    )
    assert launch.env["PYTHONPATH"].endswith(f":{tmp_path / 'mylib'}"), launch.env


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _watch(
    tmp_path: Path, *, cancel: bool, watcher: bool = True
) -> tuple[HangWatch, Clock, Said, list[str]]:
    clock, said, ended = Clock(), Said(), []
    for path, text in watcher_files(tmp_path).items() if watcher else ():
        Path(path).write_text(text)
    watch = HangWatch(
        60, cancel=cancel, folder=tmp_path, reporter=said, end=lambda: ended.append("end"),
        clock=clock, grace=20,
    )  # fmt: skip
    return watch, clock, said, ended


def test_silence_asks_for_stacks_then_ends_the_job(tmp_path: Path) -> None:
    watch, clock, said, ended = _watch(tmp_path, cancel=True)
    clock.now += 300
    watch.seen("", running=False, job_id="7")  # five minutes in the queue: not silence
    clock.now += 59
    watch.seen("step 10\n", running=True, job_id="7")
    clock.now += 59
    watch.seen("", running=True, job_id="7")
    assert said.lines == [] and not (tmp_path / "ask-7").exists()
    clock.now += 1
    watch.seen("", running=True, job_id="7")
    assert said.lines[0].startswith("job 7: no output for 1m 0s (--hang-after 1m 0s)")
    assert (tmp_path / "ask-7").is_file()
    clock.now += 5
    watch.seen(f"{HEADER}rank 0, pid 1 on n1 (t.py)\n{HEADER}rank 1, pid 2 on n2 (t.py)\n",
               running=True, job_id="7")  # fmt: skip
    assert ended == []
    clock.now += 15
    watch.seen("", running=True, job_id="7")
    assert said.lines[1:] == [
        "2 Python processes wrote their stacks (above)",
        "ending job 7 (--cancel-on-hang)",
    ]
    assert ended == ["end"] and watch.cancelled
    clock.now += 600
    watch.seen("", running=True, job_id="7")
    assert ended == ["end"]  # once


def test_without_cancel_the_job_goes_on_and_no_stacks_is_said(tmp_path: Path) -> None:
    watch, clock, said, ended = _watch(tmp_path, cancel=False)
    clock.now += 61
    watch.seen("", running=True, job_id=None)
    assert (tmp_path / "ask").is_file()  # no job known here (salloc): the shared file
    clock.now += 20
    watch.seen("", running=True, job_id=None)
    assert ended == [] and not watch.cancelled
    assert said.warnings and said.warnings[0].startswith("no stacks came back within 20s")
    assert said.lines[-1].startswith("the step goes on")
    clock.now += 59
    watch.seen("", running=True, job_id=None)
    assert len(said.lines) == 2  # the silence is counted again from there
    clock.now += 1
    watch.seen("", running=True, job_id=None)
    assert said.lines[-1].startswith("the step: no output for 1m 0s")


def test_a_job_started_without_the_watcher_is_not_asked(tmp_path: Path) -> None:
    """`logs -f --hang-after` of a job run without it: the hang is said, no stacks asked."""
    watch, clock, said, ended = _watch(tmp_path, cancel=True, watcher=False)
    clock.now += 61
    watch.seen("", running=True, job_id="8")
    assert said.lines[0].startswith("job 8: no output for 1m 1s")
    assert said.warnings == [
        f"no stack watcher in {tmp_path}: the job was not started with --hang-after"
    ]
    assert not (tmp_path / "ask-8").exists()
    clock.now += 20
    watch.seen("", running=True, job_id="8")
    assert ended == ["end"]


def _python(env: dict[str, str], code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, **env}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def test_the_watcher_writes_each_threads_stack_when_asked(tmp_path: Path) -> None:
    """The real thing: sitecustomize from the folder, a process blocked in a wait, the file
    touched, every thread's stack on stderr under one header; the image's own sitecustomize
    still loaded."""
    folder = tmp_path / "stacks"
    folder.mkdir()
    for path, text in watcher_files(folder).items():
        Path(path).write_text(text)
    own = tmp_path / "image"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['IMAGE_OWN'] = 'loaded'\n")
    env = {
        **watcher_env(folder, {"PYTHONPATH": str(own)}),
        "SLURM_JOB_ID": "42", "RANK": "3",
    }  # fmt: skip
    code = (
        "import os, threading\n"
        "def blocked_before_allreduce():\n"
        "    threading.Event().wait(60)\n"
        "print(os.environ.get('IMAGE_OWN'), flush=True)\n"
        "blocked_before_allreduce()\n"
    )
    proc = _python(env, code)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == "loaded\n"
        time.sleep(1.5)  # the watcher has read the file's first state
        ask_for_stacks(folder, "41")  # another job's: not this one's
        ask_for_stacks(folder, "42")
        # read up to the blocked frame before the kill: the dump is written a thread at a
        # time, and a loaded machine may not have written the last one yet (the child gives
        # up waiting after 60 s, which ends this loop too)
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "in blocked_before_allreduce" in line:
                break
    finally:
        proc.kill()
        proc.wait()
    assert lines[0].startswith(f"{HEADER}rank 3, pid {proc.pid} on ")
    assert lines[1].startswith(("Current thread", "Thread ")), lines
    rest = "".join(lines) + proc.stderr.read()
    assert "line 3 in blocked_before_allreduce" in rest, rest
    assert rest.count(HEADER) == 1  # the other job's file was not this one's


def test_without_the_variable_the_watcher_does_nothing(tmp_path: Path) -> None:
    for path, text in watcher_files(tmp_path).items():
        Path(path).write_text(text)
    code = "import threading; print(sorted(t.name for t in threading.enumerate()))"
    proc = _python({"PYTHONPATH": str(tmp_path)}, code)
    out, err = proc.communicate(timeout=60)
    assert out == "['MainThread']\n", err


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("USER", "u")
    return tmp_path


def test_a_watched_launch_loads_the_watcher_and_its_script_writes_it(here: Path) -> None:
    request = LaunchRequest(
        script="train.py", image="i.sif", nodes=2, ntasks_per_node=1, hang_after=600,
        env={"PYTHONPATH": "/mine"},
    )  # fmt: skip
    planned = plan_launch(load_site("local"), request)
    folder = here / ".hvd-container" / "stacks"
    assert planned.env["HVD_CONTAINER_STACKS"] == str(folder)
    assert planned.env["PYTHONPATH"] == f"{folder}:/mine"
    assert planned.env["PYTHONUNBUFFERED"] == "1"
    assert planned.files == {str(folder / "sitecustomize.py"): WATCHER}
    assert not folder.exists()  # a dry run makes nothing
    # the batch script writes the watcher before its step: its lines, run, give the same bytes
    lines = planned.script.splitlines()
    start = lines.index("# sitecustomize.py, read by the srun line")
    end = lines.index("HVD_FILE_END", start)
    done = subprocess.run(["bash", "-c", "\n".join(lines[start : end + 1]) + "\n"])
    assert done.returncode == 0
    assert (folder / "sitecustomize.py").read_text() == WATCHER
    assert f"export PYTHONPATH={folder}:/mine" in lines


@pytest.mark.usefixtures("here")
def test_an_unwatched_launch_has_none_of_it() -> None:
    planned = plan_launch(load_site("local"), LaunchRequest(script="train.py", image="i.sif"))
    assert not {"HVD_CONTAINER_STACKS", "PYTHONUNBUFFERED"} & set(planned.env)
    assert planned.files == {}


def test_a_step_run_here_is_watched_and_ended(
    here: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Inside an allocation `run` runs the step itself: its output passes through, and the
    watcher ends it as Ctrl-C does (SIGTERM to srun, stood in for by a shell)."""
    from hvd_container.launcher.run import execute, hang

    folder = here / ".hvd-container" / "stacks"
    folder.mkdir(parents=True)
    for path, text in watcher_files(folder).items():
        Path(path).write_text(text)
    monkeypatch.setattr(hang, "GRACE", 0.5)
    request = LaunchRequest(script="t.py", hang_after=1, cancel_on_hang=True)
    said = Said()
    started = time.monotonic()
    code = execute._run_watched(
        ["sh", "-c", "echo step 1; echo warn >&2; exec sleep 60"], {}, request, said, 0.1
    )
    assert code == 124 and time.monotonic() - started < 10
    assert capfd.readouterr() == ("step 1\n", "warn\n")
    assert said.lines[0].startswith("the step: no output for 1s (--hang-after 1s)")
    assert said.lines[-1] == "ending the step (--cancel-on-hang)"
    assert (folder / "ask").is_file()  # no srun here: the folder's shared file
