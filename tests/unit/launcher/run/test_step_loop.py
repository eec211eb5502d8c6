"""The step loop of a run that restarts (launcher/run/step_loop.py), its steps real processes here:
Python programs stand in for srun's step (the plan and the screen of the nodes are STAND-INS
that say which nodes each step is on and which the screen finds down). The loop on a real
cluster is tests/e2e/test_restarts.py."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from _launch_helpers import Said
from hvd_container.launcher.plan.request import LaunchOptions, request_from_options
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.run import step_loop
from hvd_container.launcher.run.screen import NodeVerdict, Screen

# each attempt of the step: the attempt's line of BEHAVIOUR (by its count in the file
# `attempts`): "progress" writes a $HVD_PROGRESS line first; then exit with the code given
STEP = """
import os, sys
attempts = os.path.join(os.environ["WHERE"], "attempts")
with open(attempts, "a") as fh:
    fh.write(os.environ["NODES"] + "\\n")
n = sum(1 for _ in open(attempts))
words = os.environ["BEHAVIOUR"].split(";")[n - 1].split()
if "progress" in words:
    with open(os.environ["HVD_PROGRESS"], "a") as fh:
        fh.write(f"ck.pt epoch {n}\\n")
code = int(words[-1])
if code:
    print("Traceback (most recent call last):", file=sys.stderr)
    print(os.environ.get("ERROR", f"RuntimeError: failure {n}"), file=sys.stderr)
sys.exit(code)
"""


@pytest.fixture()
def loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Stand-ins for the allocation (n1..n3), the plan (STEP, on the nodes it was given) and
    the screen (finds down the nodes in `down`)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    monkeypatch.delenv("HVD_SEGMENT", raising=False)
    (tmp_path / "step.py").write_text(STEP)
    state = SimpleNamespace(down=[], screened=[], where=tmp_path)

    def planned(site: Any, request: Any, mode: str, **_: Any) -> SimpleNamespace:
        listed = next(o for o in request.srun_options if o.startswith("--nodelist="))
        env = {**request.env, "NODES": listed.split("=", 1)[1], "WHERE": str(tmp_path)}
        return SimpleNamespace(
            argv=[sys.executable, str(tmp_path / "step.py")], env=env, warnings=[]
        )

    def screened(site: Any, request: Any, reporter: Any, *, nodes: list[str]) -> Screen:
        state.screened.append(list(nodes))
        verdicts = [NodeVerdict(n, "down" if n in state.down else "ok", "gone") for n in nodes]
        return Screen(nodes=nodes, verdicts=verdicts)

    monkeypatch.setattr(step_loop, "plan", planned)
    monkeypatch.setattr(step_loop, "ThisMachine", lambda: None)
    monkeypatch.setattr(
        step_loop.screening, "allocation_nodes", lambda _asked=None: ["n1", "n2", "n3"]
    )
    monkeypatch.setattr(step_loop.screening, "screen", screened)
    return state


def _run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, behaviour: str, **more: Any
) -> tuple[int, Said]:
    monkeypatch.setenv("BEHAVIOUR", behaviour)
    site = tmp_path / "t.yaml"
    site.write_text(yaml.safe_dump({"name": "t", "runtime": {"kind": "none"}}))
    given = LaunchOptions(site=str(site), nodes="2", max_restarts="3", **more)
    site_, request = request_from_options("step.py", [], given)
    said = Said()
    return step_loop.run_restarting(site_, request, said, poll=0.05), said


def _attempts(tmp_path: Path) -> list[str]:
    return (tmp_path / "attempts").read_text().split()


def test_a_lost_node_is_replaced_by_the_spare_and_a_script_error_after_progress_retried(
    loop: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop.down = []
    behaviour = "progress 1;progress 1;0"

    def n2_goes_down_after_the_first_screen(*args: Any, **kw: Any) -> Screen:
        found = real(*args, **kw)
        loop.down = ["n2"]
        return found

    real = step_loop.screening.screen
    monkeypatch.setattr(step_loop.screening, "screen", n2_goes_down_after_the_first_screen)
    code, said = _run(tmp_path, monkeypatch, behaviour, spare_nodes="1")
    assert code == 0, said.lines
    assert _attempts(tmp_path) == ["n1,n2", "n1,n2", "n1,n3"]  # the spare, once n2 was lost
    assert loop.screened == [["n1", "n2"], ["n1", "n2"]]
    assert any(
        "the script failed" in line and "RuntimeError: failure 1" in line for line in said.lines
    )
    assert any("n2 lost" in line for line in said.lines), said.lines
    assert said.lines[-1].startswith("run done: 3 steps, 2 restarts (1 script, 1 node), ")


def test_a_syntax_error_is_not_retried(
    loop: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ERROR", "SyntaxError: invalid syntax")
    code, said = _run(tmp_path, monkeypatch, "progress 1;0")
    assert code == 1 and _attempts(tmp_path) == ["n1,n2"]
    assert any("not worth a retry: SyntaxError" in line for line in said.lines), said.lines
    assert said.lines[-1] == "run stopped: 1 step"


def test_a_failing_script_stops_after_max_restarts(
    loop: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, said = _run(tmp_path, monkeypatch, ";".join(["progress 2"] * 6))
    assert code == 2 and len(_attempts(tmp_path)) == 4  # the first and 3 restarts
    assert "3 restarts already (--max-restarts 3)" in said.lines[-2], said.lines


def test_the_segments_so_far_count_as_restarts(
    loop: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    code, said = _run(tmp_path, monkeypatch, ";".join(["progress 2"] * 6))
    assert code == 2 and len(_attempts(tmp_path)) == 2, said.lines


def test_without_a_spare_a_lost_node_stops_the_run_unless_it_may_shrink(
    loop: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(step_loop.screening, "allocation_nodes", lambda _asked=None: ["n1", "n2"])
    loop.down = ["n2"]
    code, said = _run(tmp_path, monkeypatch, "1;0")
    assert code == 1 and _attempts(tmp_path) == ["n1,n2"]
    assert "1 good nodes are left of 2, 2 needed" in said.lines[-2], said.lines
    (tmp_path / "attempts").unlink()
    code, said = _run(tmp_path, monkeypatch, "1;0", spare_nodes="1", screen_policy="shrink")
    assert code == 0 and _attempts(tmp_path) == ["n1,n2", "n1"], said.lines


def test_slurm_s_warning_is_handed_to_the_step_and_ends_the_loop(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    program = (
        "import signal, sys, time, pathlib\n"
        "signal.signal(signal.SIGUSR1, lambda *a: sys.exit(75))\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "print('working', flush=True)\n"
        "time.sleep(30)\n"
    )

    def warn_when_ready() -> None:
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGUSR1)

    threading.Thread(target=warn_when_ready, daemon=True).start()
    ran = step_loop.run_step([sys.executable, "-c", program], {}, None, Reporter(), poll=0.05)
    assert (ran.exit_code, ran.warned, ran.hung) == (75, True, False)
    assert ran.last_lines == ("working",)
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL  # this process's own again


def test_the_step_s_last_lines_are_kept(tmp_path: Path) -> None:
    program = (
        "import sys\nfor i in range(100): print(i)\nprint('end', file=sys.stderr)\nsys.exit(4)"
    )
    ran = step_loop.run_step([sys.executable, "-c", program], {}, None, Reporter(), poll=0.05)
    assert ran.exit_code == 4 and not ran.warned
    assert len(ran.last_lines) == step_loop.TAIL and "end" in ran.last_lines
    assert "" not in ran.last_lines and "99" in ran.last_lines  # whole lines of each stream


def test_under_policy_requeue_a_job_short_of_nodes_hands_them_to_its_script(
    loop: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No spare left: the loop names the lost nodes in runs/JOB.lost and exits 79, which the
    job script of --until-done takes as "go on without them" (test_batch_until_done.py)."""
    monkeypatch.setattr(step_loop.screening, "allocation_nodes", lambda _asked=None: ["n1", "n2"])
    loop.down = ["n2"]
    code, said = _run(tmp_path, monkeypatch, "1;0", screen_policy="requeue")
    assert code == 79 and _attempts(tmp_path) == ["n1,n2"]
    assert (tmp_path / ".hvd-container" / "runs" / "77.lost").read_text() == "n2\n"
    assert "goes on in a next segment without n2 (--screen-policy requeue)" in said.lines[-2]
    assert said.lines[-1] == "run goes on in a next segment: 1 step"


def test_a_warned_step_the_job_script_ends_is_at_the_time_limit_not_done(tmp_path: Path) -> None:
    """The job script ends a step still running after its checkpoint time (SIGTERM to this
    process, raised as the CLI raises it): srun is ended, and whatever the program's exit
    (Lightning's is 0), the step ended at the time limit."""
    from hvd_container.core.errors import Terminated

    ready = tmp_path / "ready"
    program = (
        "import signal, sys, time, pathlib\n"
        "signal.signal(signal.SIGUSR1, lambda *a: print('checkpoint written', flush=True))\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(30)\n"
    )

    def raise_terminated(*_: Any) -> None:
        raise Terminated()

    def warn_then_end() -> None:
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        threading.Thread(target=warn_then_end, daemon=True).start()
        ran = step_loop.run_step([sys.executable, "-c", program], {}, None, Reporter(), 0.05)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert (ran.exit_code, ran.warned) == (step_loop.TERMINATED_EXIT, True)
    assert "checkpoint written" in ran.last_lines
    end = step_loop._why(None, None, ran, ["n1"], 0.0, 1.0, tmp_path / "none", Reporter())  # type: ignore[arg-type]
    assert end.why == "time"


def test_without_the_warning_sigterm_ends_the_loop_as_before(tmp_path: Path) -> None:
    from hvd_container.core.errors import Terminated

    def raise_terminated(*_: Any) -> None:
        raise Terminated()

    def end_soon() -> None:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        threading.Thread(target=end_soon, daemon=True).start()
        with pytest.raises(Terminated):
            step_loop.run_step(
                [sys.executable, "-c", "import time; time.sleep(30)"], {}, None, Reporter(), 0.05
            )
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_requeued_job_of_a_later_segment_is_both_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HVD_SEGMENT", "2")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert step_loop.segment_now() == 3
    monkeypatch.setenv("SLURM_RESTART_COUNT", "x")
    assert step_loop.segment_now() == 2
