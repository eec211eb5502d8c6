"""--until-done: the batch script of a job that goes on past its time limit in segments.

The script runs here under bash, as Slurm runs it, with STAND-INS for srun (its options left
out, the program run here), scontrol and sbatch (each records its arguments and environment);
the test sends the script Slurm's warning (USR1) as `--signal=B:USR1@GRACE` would.
tests/e2e/test_until_done.py runs a training past a real job's time limit."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from _launch_helpers import isolated, plan_launch  # noqa: F401
from hvd_container.launcher.plan.request import LaunchOptions, LaunchRequest, request_from_options
from hvd_container.launcher.run import commands
from hvd_container.launcher.sites.loader import load_site
from test_batch import CASES

from hvd_container.cli.app import main
from hvd_container.core.errors import UserError

# the step's program: says it started, then waits; on USR1 it exits as the contract asks (75),
# unless told to finish first; FINISH: exit 0 after that many seconds; FAIL: exit with that
# code at once (79 as the step loop does when it lost nodes it could not spare, LOST its file);
# TRAINS_ON: USR1 changes nothing (Lightning whose own requeue failed) and SIGTERM ends it with
# exit 0, as Lightning's does
PROGRAM = """
import os, signal, sys, time
open(os.environ["STARTED"], "w").close()
if os.environ.get("LOST"):
    os.makedirs(".hvd-container/runs", exist_ok=True)
    open(".hvd-container/runs/123.lost", "w").write(os.environ["LOST"] + "\\n")
if os.environ.get("FAIL"):
    sys.exit(int(os.environ["FAIL"]))
if os.environ.get("TRAINS_ON"):
    signal.signal(signal.SIGUSR1, lambda *a: None)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
else:
    signal.signal(signal.SIGUSR1, lambda *a: sys.exit(75))
time.sleep(float(os.environ.get("FINISH", "30")))
"""


def _planned(
    tmp_path: Path, requeue: bool, controller: str = "mpi", grace: str = "60s", **more: Any
) -> str:
    """The batch script the plan writes for an --until-done launch on a site of runtime none."""
    site = tmp_path / "t.yaml"
    site.write_text(
        yaml.safe_dump(
            {"name": "t", "runtime": {"kind": "none"}, "scheduler": {"requeue": requeue}}
        )
    )
    given = LaunchOptions(
        site=str(site), nodes="1", controller=controller, until_done=True, time="10",
        grace=grace, **more,
    )  # fmt: skip
    site_, request = request_from_options("t.py", [], given)
    plan = plan_launch(site_, request)
    assert plan.script is not None
    return str(plan.script)


def _script(tmp_path: Path, requeue: bool, controller: str = "mpi", **more: Any) -> str:
    """The plan's script with its step line (this tool's `run --max-restarts`, tested in
    test_step_loop.py) made the srun of PROGRAM: what runs here is the script's own lines."""
    (tmp_path / "t.py").write_text(PROGRAM)
    lines = _planned(tmp_path, requeue, controller, **more).split("\n")
    at = next(i for i, line in enumerate(lines) if " -m hvd_container run " in line)
    assert lines[at].endswith(" &"), lines[at]
    lines[at] = "srun -N1 python t.py &"
    return "\n".join(lines)


def _run(
    tmp_path: Path, script: str, *, warn: bool, env: dict[str, str] | None = None
) -> tuple[int, dict[str, list[str]], str]:
    """Run the script; with `warn`, send it USR1 once its step started. Returns its exit
    status, what each stand-in was called with (and sbatch's HVD_SEGMENT and SLURM_JOB_ID),
    and its standard error."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir(exist_ok=True)
    calls.mkdir(exist_ok=True)
    stand_ins = {
        # srun's options (with their values) left out: the program is python
        "srun": '#!/bin/sh\nwhile [ "$1" != python ]; do shift; done\nexec "$@"\n',
        # `show job`: the job's state as JOB_STATE says (RUNNING, not requeued, by default)
        "scontrol": (
            f'#!/bin/sh\nif [ "$1" = show ]; then [ -z "$SHOW_FAILS" ] || exit 1; '
            'echo "JobId=123 JobState=${JOB_STATE:-RUNNING} Reason=None"; '
            'echo "   Requeue=1 Restarts=${JOB_RESTARTS:-0} BatchFlag=1"; exit 0; fi\n'
            f'echo "$@" > {calls}/scontrol\n'
        ),
        "sbatch": f'#!/bin/sh\necho "$@ HVD_SEGMENT=$HVD_SEGMENT HVD_PREVIOUS_JOB=$HVD_PREVIOUS_JOB HVD_EXCLUDED=$HVD_EXCLUDED SLURM_JOB_ID=${{SLURM_JOB_ID:-}}" > {calls}/sbatch\necho 124\n',
    }
    for name, text in stand_ins.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    path = tmp_path / "job.sh"
    path.write_text(script)
    started = tmp_path / "started"
    started.unlink(missing_ok=True)
    full = {
        **os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "123",
        "STARTED": str(started), **(env or {}),
    }  # fmt: skip
    proc = subprocess.Popen(
        ["bash", str(path)], cwd=tmp_path, env=full, stderr=subprocess.PIPE, text=True
    )
    if warn:
        deadline = time.monotonic() + 20
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=60)
    found = {p.name: p.read_text().split() for p in calls.iterdir()}
    return proc.returncode, found, err


def test_the_script_asks_slurm_for_the_warning_and_names_the_contract(tmp_path: Path) -> None:
    script = _planned(tmp_path, requeue=True, spare_nodes="1", max_restarts="4")
    assert "#SBATCH --signal=B:USR1@60" in script and "#SBATCH --open-mode=append" in script
    assert "#SBATCH --requeue" in script and "#SBATCH --no-requeue" not in script
    # a lost node must not end the job; the allocation holds the spare
    assert "#SBATCH --no-kill" in script and "#SBATCH --nodes=2" in script
    step = next(line for line in script.split("\n") if " -m hvd_container run " in line)
    words = shlex.split(step.removesuffix(" &"))
    assert words[1:4] == ["-m", "hvd_container", "run"]
    # the job's line is this tool's loop: the training's nodes, the restarts, the contract
    for word in ("--nodes=1", "--spare-nodes=1", "--max-restarts=4",
                 "--env=HVD_CHECKPOINT_SIGNAL=USR1", "--env=HVD_CHECKPOINT_GRACE=60"):  # fmt: skip
        assert word in words, words
    assert not any(w.startswith(("--until-done", "--grace")) for w in words), words
    assert words[-2:] == ["--", "t.py"]
    assert "#SBATCH --no-requeue" in _planned(tmp_path, requeue=False)


def test_a_warned_step_that_checkpointed_is_requeued_where_the_site_allows(tmp_path: Path) -> None:
    code, calls, err = _run(tmp_path, _script(tmp_path, requeue=True), warn=True)
    assert code == 0, err
    assert calls == {"scontrol": ["requeue", "123"]}, calls
    assert "segment 0: the time limit is near" in err and "requeued; segment 1 resumes" in err


def test_elsewhere_the_next_segment_is_a_job_that_depends_on_this_one(tmp_path: Path) -> None:
    code, calls, err = _run(
        tmp_path, _script(tmp_path, requeue=False), warn=True,
        env={"HVD_SEGMENT": "2", "SLURM_NODELIST": "node1"},
    )  # fmt: skip
    assert code == 0, err
    words = calls["sbatch"]
    assert words[:2] == ["--parsable", "--dependency=afterany:123"], words
    assert words[2] == str(tmp_path / "job.sh")  # this script again
    assert words[3:] == [
        "HVD_SEGMENT=3",
        "HVD_PREVIOUS_JOB=123",
        "HVD_EXCLUDED=",
        "SLURM_JOB_ID=",
    ], words  # none of this job's
    assert "segment 3 is job 124" in err and "scontrol" not in calls


def test_a_step_that_ends_without_the_warning_ends_the_job_with_its_status(
    tmp_path: Path,
) -> None:
    script = _script(tmp_path, requeue=True)
    code, calls, _ = _run(tmp_path, script, warn=False, env={"FINISH": "0.1"})
    assert (code, calls) == (0, {})  # done
    code, calls, _ = _run(tmp_path, script, warn=False, env={"FAIL": "3"})
    assert (code, calls) == (3, {})  # a script error is not a time limit
    code, calls, _ = _run(tmp_path, script, warn=False, env={"FAIL": "79"})
    assert (code, calls) == (79, {})  # without the step loop's file of lost nodes: its status


@pytest.mark.parametrize("requeue", [True, False])
def test_a_job_that_lost_nodes_it_could_not_spare_goes_on_without_them(
    tmp_path: Path, requeue: bool
) -> None:
    """The step loop exits 79 and names the lost nodes: the next segment is a job of its own
    (even where the site requeues: a requeued job keeps its nodes) that excludes them, and
    those lost before (HVD_EXCLUDED)."""
    script = _script(tmp_path, requeue=requeue)
    code, calls, err = _run(
        tmp_path, script, warn=False,
        env={"FAIL": "79", "LOST": "node3", "HVD_EXCLUDED": "node7", "HVD_SEGMENT": "1"},
    )  # fmt: skip
    assert code == 0, err
    assert "scontrol" not in calls
    words = calls["sbatch"]
    assert words[:3] == ["--parsable", "--exclude=node7,node3", "--dependency=afterany:123"], words
    assert words[4:] == ["HVD_SEGMENT=2", "HVD_PREVIOUS_JOB=123", "HVD_EXCLUDED=node7,node3",
                         "SLURM_JOB_ID="], words  # fmt: skip
    assert (
        "segment 1 ended with nodes lost (node3): segment 2 is job 124, from the last "
        "checkpoint, without node7,node3"
    ) in err


def test_max_restarts_bounds_the_segments(tmp_path: Path) -> None:
    script = _script(tmp_path, requeue=True, max_restarts="2")
    code, calls, err = _run(tmp_path, script, warn=True, env={"SLURM_RESTART_COUNT": "2"})
    assert (code, calls) == (75, {}), err
    assert "after 2 restarts (--max-restarts): stopping" in err


def test_a_lightning_program_that_requeued_its_job_is_not_requeued_again(tmp_path: Path) -> None:
    script = _script(tmp_path, requeue=True, controller="lightning")
    for state, restarts in (("REQUEUED", "1"), ("PENDING", "1"), ("RUNNING", "1")):
        code, calls, err = _run(
            tmp_path, script, warn=True, env={"JOB_STATE": state, "JOB_RESTARTS": restarts}
        )
        assert (code, calls) == (75, {}), err  # no requeue, no job from the script
        assert "the ranks are told to write a checkpoint" in err


def test_where_lightning_could_not_requeue_the_script_goes_on_once(tmp_path: Path) -> None:
    """Lightning's `scontrol requeue` inside the container failed (no scontrol there): it trains
    on; the script ends the step once its checkpoint time is over and queues the next segment
    itself, a job that depends on this one."""
    script = _script(tmp_path, requeue=True, controller="lightning", grace="10s")
    started = time.monotonic()
    code, calls, err = _run(tmp_path, script, warn=True, env={"TRAINS_ON": "1"})
    assert code == 0, err
    assert 5 <= time.monotonic() - started < 20  # 10 s of grace: 5 s for the checkpoint
    assert "the step still runs 5 s after the warning: it is ended" in err
    assert "the program did not requeue its job: this script goes on" in err
    assert list(calls) == ["sbatch"] and "--dependency=afterany:123" in calls["sbatch"], calls
    assert "segment 1 is job 124" in err


def test_where_it_is_not_known_whether_lightning_requeued_the_run_stops(tmp_path: Path) -> None:
    script = _script(tmp_path, requeue=True, controller="lightning", grace="10s")
    code, calls, err = _run(tmp_path, script, warn=True, env={"SHOW_FAILS": "1"})
    assert (code, calls) == (75, {}), err
    assert "whether the program requeued its job is not known: stopping" in err


def test_a_step_that_trains_on_after_the_warning_is_ended_and_the_job_goes_on(
    tmp_path: Path,
) -> None:
    script = _script(tmp_path, requeue=True, grace="10s")
    code, calls, err = _run(tmp_path, script, warn=True, env={"TRAINS_ON": "1"})
    # its exit 0 after SIGTERM is not "done": the script ended it at the time limit
    assert code == 0 and calls == {"scontrol": ["requeue", "123"]}, err
    assert "the step still runs 5 s after the warning: it is ended" in err


def test_a_requeued_job_of_a_later_segment_counts_both(tmp_path: Path) -> None:
    script = _script(tmp_path, requeue=False, max_restarts="3")
    env = {"HVD_SEGMENT": "2", "SLURM_RESTART_COUNT": "1"}
    code, calls, err = _run(tmp_path, script, warn=True, env=env)
    assert (code, calls) == (75, {}), err
    assert "segment 3 ended after 3 restarts (--max-restarts): stopping" in err


def test_the_checkpoint_time_leaves_the_script_time_to_go_on() -> None:
    from hvd_container.launcher.script.batch import checkpoint_time

    assert [checkpoint_time(g) for g in (5, 12, 20, 60, 120, 600)] == [1, 7, 15, 45, 90, 450]


@pytest.mark.parametrize(
    ("more", "message"),
    [
        ({"max_restarts": "2", "until_done": None}, "--max-restarts goes with --until-done"),
        ({"grace": "1m", "max_restarts": "2", "until_done": None}, "--grace goes with"),
        ({"spare_nodes": "1", "until_done": None}, "--spare-nodes goes with --until-done"),
        ({"spare_nodes": "0"}, "--spare-nodes: must be 1 or more"),
        ({"spare_nodes": "1", "nodes": None}, "--spare-nodes goes with -N/--nodes"),
        (
            {"screen_policy": "shrink", "until_done": None},
            "--screen-policy goes with --screen or a run",
        ),
        (
            {"screen_policy": "requeue", "until_done": None, "screen": True},
            "--screen-policy requeue: the job goes on",
        ),
        ({"hang_after": "1m", "cancel_on_hang": True}, "--cancel-on-hang: a run that restarts"),
        ({"grace": "19h", "time": "1-0"}, "more than Slurm's --signal takes"),
        ({"grace": "5s"}, "--grace: 5s is too short"),
        ({"grace": "10m"}, "is not shorter than the time limit 10"),
        ({"max_restarts": "1001"}, "--max-restarts: must be 0 to 1000"),
    ],
)
def test_until_done_s_options_are_checked_once(
    tmp_path: Path, more: dict[str, Any], message: str
) -> None:
    site = tmp_path / "t.yaml"
    site.write_text(yaml.safe_dump({"name": "t", "runtime": {"kind": "none"}}))
    values = {"site": str(site), "nodes": "1", "until_done": True, "time": "10", **more}
    given = LaunchOptions(**values)
    site_, request = request_from_options("t.py", [], given)
    with pytest.raises(UserError, match=message):
        plan_launch(site_, request)


def test_inside_an_allocation_until_done_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "5")
    site = tmp_path / "t.yaml"
    site.write_text(yaml.safe_dump({"name": "t", "runtime": {"kind": "none"}}))
    site_, request = request_from_options(
        "t.py", [], LaunchOptions(site=str(site), until_done=True)
    )
    with pytest.raises(UserError, match="--until-done: the job goes on in segments of its own"):
        plan_launch(site_, request)


def test_salloc_cannot_go_on_in_segments(tmp_path: Path) -> None:
    from hvd_container.launcher.run.execute import run_plan

    site = tmp_path / "t.yaml"
    site.write_text(yaml.safe_dump({"name": "t", "runtime": {"kind": "none"}}))
    site_, request = request_from_options(
        "t.py", [], LaunchOptions(site=str(site), until_done=True, time="10")
    )
    with pytest.raises(UserError, match="--until-done and --salloc exclude each other"):
        run_plan(site_, request, salloc=True, dry_run=True)


# the runtimes no shipped site uses, each in a profile of its own
RUNTIME_ONLY = {kind: ({"name": "t", "runtime": {"kind": kind}}, {"image": "u/img:1", "nodes": 2})
                for kind in ("pyxis", "podman-hpc")}  # fmt: skip


@pytest.mark.parametrize("name", [*sorted(CASES), *sorted(RUNTIME_ONLY)])
def test_every_runtime_s_job_runs_the_same_step_in_the_loop(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:  # fmt: skip
    """The loop lives in the job script and this tool's step loop, not in a runtime: for every
    shipped site (Apptainer, Singularity, Shifter, Charliecloud, the Container Engine) and a
    profile of Pyxis and of podman-hpc, the
    --until-done job's line, read back by the CLI inside the allocation, plans the very step a
    plain run there plans (the loop adds only --overlap and --nodelist: test_step_loop.py)."""
    if name in RUNTIME_ONLY:
        profile, fields = RUNTIME_ONLY[name]
        site_name = str(tmp_path / "t.yaml")
        Path(site_name).write_text(yaml.safe_dump(profile))
    else:
        site_name, fields = CASES[name]
    values = {**fields, "script": fields.get("script", "train.py"), "until_done": True,
              "time": fields.get("time") or "1:00:00", "grace": 60}  # fmt: skip
    if values.get("nodes"):
        values["spare_nodes"] = 1
    if not values.get("image"):  # the local case plans from a recipe's facts: a line needs a file
        values.update(image="cpu.sqfs", facts=None)
    script = plan_launch(load_site(site_name), LaunchRequest(**values), "batch").script
    assert "#SBATCH --no-kill" in script and "#SBATCH --signal=B:USR1@60" in script
    line = next(x for x in script.split("\n") if " -m hvd_container run " in x)
    words = shlex.split(line.removesuffix(" &"))[4:]  # after python -m hvd_container run
    assert "--max-restarts=10" in words, words
    monkeypatch.setenv("SLURM_JOB_ID", "9")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[1-3]")
    plain = [w for w in words if not w.startswith(("--max-restarts=", "--spare-nodes=",
                                                    "--screen-policy="))]  # fmt: skip
    asked: list[LaunchRequest] = []
    planned = commands.run_plan

    def run_plan(site: Any, request: LaunchRequest, **options: Any) -> Any:
        asked.append(request)
        return planned(site, request, **options)

    monkeypatch.setattr(commands, "run_plan", run_plan)
    lines = []
    for argv in (words, plain):
        assert main(["run", "--dry-run", *argv]) == 0
        lines.append(capsys.readouterr().out)
    assert lines[0] == lines[1] and " srun " in f" {lines[0]}", lines
    # the line asks for the request again: each value the user gave, and the contract
    for key, value in values.items():
        if key not in ("until_done", "grace", "facts", "env"):
            assert getattr(asked[0], key) == value, key
    contract = {"HVD_CHECKPOINT_SIGNAL": "USR1", "HVD_CHECKPOINT_GRACE": "60"}
    assert asked[0].env == {**fields.get("env", {}), **contract}


def test_a_lightning_job_is_told_what_its_own_requeue_needs(tmp_path: Path) -> None:
    site = tmp_path / "t.yaml"
    site.write_text(yaml.safe_dump({"name": "t", "runtime": {"kind": "none"}}))
    given = LaunchOptions(site=str(site), nodes="1", controller="lightning", until_done=True,
                          time="10")  # fmt: skip
    site_, request = request_from_options("t.py", [], given)
    said = " ".join(plan_launch(site_, request).warnings)
    assert (
        "the job script goes on in a job of its own" in said
        and "site t is not known to allow requeue" in said
    )


@pytest.mark.parametrize(
    ("more", "message"),
    [
        ({"spare_nodes": "1;id"}, "--spare-nodes: '1;id' is not a valid int"),
        ({"spare_nodes": "\u0663"}, "--spare-nodes: '\u0663' is not a valid int"),
        ({"max_restarts": "$(id)"}, "--max-restarts: '\\$\\(id\\)' is not a valid int"),
        ({"grace": "1m\n#SBATCH --uid=0"}, "--grace: .* is not a duration"),
        (
            {"screen_policy": "requeue;id", "spare_nodes": "1"},
            "--screen-policy: 'requeue;id' is not allowed",
        ),
    ],
)
def test_hostile_values_of_the_restart_options_are_one_line(
    tmp_path: Path, more: dict[str, Any], message: str
) -> None:
    site = tmp_path / "t.yaml"
    site.write_text(yaml.safe_dump({"name": "t", "runtime": {"kind": "none"}}))
    given = LaunchOptions(site=str(site), nodes="1", until_done=True, time="10", **more)
    with pytest.raises(UserError, match=message):
        site_, request = request_from_options("t.py", [], given)
        plan_launch(site_, request)
