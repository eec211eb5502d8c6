"""The step of a run that restarts, inside an allocation: `run --max-restarts N` there, and the
line of an `--until-done` job (launcher/plan/planner.py's job_step).

Each step runs on -N of the allocation's nodes (--nodelist: the first that are not lost; the
others are spares), its output passing through and its last lines kept. Slurm's warning of the
time limit (SIGUSR1, from the job script's trap) is handed on to the step. When the step ends,
why is found (launcher/run/restarts.py's rules decide what follows): a hang is the watch's
(--hang-after ended it), a failure is screened for a lost node (launcher/run/screen.py, on the
nodes the step ran on), else it is the script's. A restarted step starts from the last
checkpoint the script wrote, as a new step on good nodes.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

from hvd_container.launcher.plan.planner import plan
from hvd_container.launcher.plan.request import DEFAULT_MAX_RESTARTS, LaunchRequest
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.run import screen as screening
from hvd_container.launcher.run.execute import copy_output, drained, end_step, found_program
from hvd_container.launcher.run.hang import HANG_EXIT, HangWatch, duration_text, job_id_here
from hvd_container.launcher.run.restarts import (
    PROGRESS,
    StepEnd,
    decide,
    error_line,
    for_good,
    lost_time,
)
from hvd_container.launcher.run.run_record import RUNS_FOLDER, write_record
from hvd_container.launcher.runtimes import tool_folder
from hvd_container.launcher.script.batch import NODES_LOST_EXIT
from hvd_container.launcher.sites.machine import ThisMachine
from hvd_container.launcher.sites.model import Site

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import Terminated, UserError

TAIL = 40  # the step's last lines kept: the error quoted, the rules' evidence
ALLOCATION_TASKS = ("SLURM_NTASKS", "SLURM_NPROCS")  # srun reads either as its -n
# a step whose node was lost keeps its CPUs in Slurm's books until the job ends when its srun
# left first (22.05: "unable to update job's core use information due to job resizing"): the
# loop's steps, one at a time on a node, share them
OVERLAP = ("--overlap",)
# a step the job script ended after Slurm's warning (SIGTERM): never 'done'
TERMINATED_EXIT = 128 + signal.SIGTERM


@dataclass(frozen=True)
class StepRun:
    """What running one step left: its exit code, whether the hang watch ended it, whether
    Slurm's warning came while it ran, and its last lines."""

    exit_code: int
    hung: bool
    warned: bool
    last_lines: tuple[str, ...]


def run_step(
    argv: list[str], env: dict[str, str], hang_after: int | None, reporter: Reporter,
    poll: float = 0.5,
) -> StepRun:  # fmt: skip
    """Run one srun step, its output passing through; SIGUSR1 to this process goes on to the
    step (srun hands it to every task); --hang-after's watch ends a step that went silent."""
    # the allocation's task count is srun's -n unless given: a step on fewer nodes than the
    # allocation would ask for more tasks than its nodes hold
    inherited = {k: v for k, v in os.environ.items() if k not in ALLOCATION_TASKS}
    proc = subprocess.Popen(
        argv, executable=found_program(argv), env={**inherited, **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    warned = False

    def hand_on(signum: int, frame: FrameType | None) -> None:
        nonlocal warned
        warned = True
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGUSR1)

    before = signal.signal(signal.SIGUSR1, hand_on)
    # a queue each: a line is whole within its own stream only
    came: list[queue.Queue[str]] = [queue.Queue(), queue.Queue()]
    copies = [
        threading.Thread(target=copy_output, args=(pipe, out.buffer, into), daemon=True)
        for pipe, out, into in (
            (proc.stdout, sys.stdout, came[0]),
            (proc.stderr, sys.stderr, came[1]),
        )
    ]
    for copy in copies:
        copy.start()
    watch = None
    if hang_after:
        watch = HangWatch.for_launch(
            hang_after, True, reporter, proc.terminate, ending="--hang-after: it starts again"
        )
    tail: collections.deque[str] = collections.deque(maxlen=TAIL)
    partial = ["", ""]
    job_id = job_id_here()
    try:
        while True:
            running = proc.poll() is None
            if not running:
                for copy in copies:
                    copy.join(timeout=10)
            text = ""
            for i, stream in enumerate(came):
                got = "".join(drained(stream))
                *whole, partial[i] = (partial[i] + got).split("\n")
                tail.extend(whole)
                text += got
            if watch is not None and running:
                watch.seen(text, running=True, job_id=job_id)
            if not running:
                break
            time.sleep(poll)
    except KeyboardInterrupt as exc:
        end_step(proc)
        if not (warned and isinstance(exc, Terminated)):
            raise
        # the job script ends a step that did not end within its grace after the warning:
        # the time limit's end, whatever the program's own exit (Lightning's is 0)
        for copy in copies:
            copy.join(timeout=5)
        for i, stream in enumerate(came):
            tail.extend(
                line for line in (partial[i] + "".join(drained(stream))).split("\n") if line
            )
        return StepRun(TERMINATED_EXIT, False, True, tuple(tail))
    finally:
        signal.signal(signal.SIGUSR1, before)
    tail.extend(rest for rest in partial if rest)
    hung = watch is not None and watch.cancelled
    return StepRun(proc.returncode, hung, warned, tuple(tail))


def read_progress(path: Path) -> tuple[tuple[str, ...], float]:
    """The lines a step wrote to its $HVD_PROGRESS file, and when it wrote the last."""
    try:
        text = path.read_text(errors="replace")
        at = path.stat().st_mtime
    except OSError:
        return (), 0.0
    lines = tuple(line.strip() for line in text.splitlines() if line.strip())
    return lines, (at if lines else 0.0)


def segment_now() -> int:
    """The segment of an --until-done run this job is (0 the first, or outside one): a job of
    a later segment (HVD_SEGMENT) may have been requeued too (SLURM_RESTART_COUNT)."""
    total = 0
    for name in ("SLURM_RESTART_COUNT", "HVD_SEGMENT"):
        value = os.environ.get(name, "")
        if value.isascii() and value.isdigit():
            total += int(value)
    return total


def run_restarting(
    site: Site, request: LaunchRequest, reporter: Reporter, *, poll: float = 0.5
) -> int:
    """Run the request's step until it is done, restarting it as the rules allow; return the
    last step's exit code (HANG_EXIT when the last was ended hung)."""
    nodes = screening.allocation_nodes(request.nodes)
    spares = request.spare_nodes or 0
    wanted = request.nodes or max(1, len(nodes) - spares)
    if wanted > len(nodes):
        raise UserError(
            f"-N/--nodes {wanted}: the allocation has {len(nodes)} nodes ({', '.join(nodes)})"
        )
    limit = DEFAULT_MAX_RESTARTS if request.max_restarts is None else request.max_restarts
    segment = segment_now()
    budget = max(0, limit - segment)  # the segments so far count as restarts
    folder = tool_folder("the run's progress files") / "progress"
    folder.mkdir(mode=0o700, exist_ok=True)
    runs = folder.parent / RUNS_FOLDER
    runs.mkdir(mode=0o700, exist_ok=True)
    job = job_id_here() or str(os.getpid())
    lost: list[str] = []
    ends: list[StepEnd] = []
    while True:
        good = [n for n in nodes if n not in lost]
        step_request = _on_nodes(request, good, wanted)
        used = good[: step_request.nodes or wanted]
        progress = folder / f"{job}-{segment}-{len(ends)}"
        progress.unlink(missing_ok=True)
        step_request = replace(step_request, env={**step_request.env, PROGRESS: str(progress)})
        launch = plan(site, step_request, "run", machine=ThisMachine())
        if not ends:
            reporter.warn(launch.warnings)
        reporter.status(f"step {len(ends) + 1} on {', '.join(used)}")
        started = time.time()
        ran = run_step(launch.argv, launch.env, request.hang_after, reporter, poll)
        ended = time.time()
        end = _why(site, request, ran, used, started, ended, progress, reporter)
        ends.append(end)
        write_record(runs, job, segment, ends)
        decision = decide(ends, budget)
        lost += [n for n in end.lost if n not in lost]
        reporter.status(f"step {len(ends)} ended: {_ended_words(end)}; {decision.why}")
        if not decision.restart:
            break
        short = len([n for n in nodes if n not in lost]) < wanted
        if short and request.screen_policy == "requeue":
            write_text(runs / f"{job}.lost", ",".join(lost) + "\n", mode=0o600)
            reporter.status(
                f"{len(nodes) - len(lost)} good nodes are left of {len(nodes)}, {wanted} needed: "
                f"the job goes on in a next segment without {', '.join(lost)} "
                "(--screen-policy requeue)"
            )
            reporter.status(summary(ends, going_on=True))
            return NODES_LOST_EXIT
        if short and request.screen_policy != "shrink":
            reporter.status(
                f"stopping: {len(nodes) - len(lost)} good nodes are left of {len(nodes)}, "
                f"{wanted} needed (--spare-nodes more, --screen-policy shrink to run on fewer, "
                "or requeue to go on elsewhere)"
            )
            break
    reporter.status(summary(ends))
    last = ends[-1]
    return HANG_EXIT if last.why == "hang" else last.exit_code


def _on_nodes(request: LaunchRequest, good: list[str], wanted: int) -> LaunchRequest:
    """The request on the first `wanted` good nodes (fewer under --screen-policy shrink, its
    ranks fewer in proportion)."""
    if not good:
        raise UserError("no node of the allocation is left to run on")
    nodes = min(wanted, len(good))
    ntasks = request.ntasks
    if ntasks is not None and nodes < wanted:
        ntasks = max(nodes, ntasks * nodes // wanted)
    listed = f"--nodelist={','.join(good[:nodes])}"
    return replace(
        request, nodes=nodes, ntasks=ntasks, srun_options=[*request.srun_options, *OVERLAP, listed]
    )


def _why(
    site: Site, request: LaunchRequest, ran: StepRun, used: list[str], started: float,
    ended: float, progress: Path, reporter: Reporter,
) -> StepEnd:  # fmt: skip
    """How the step ended: done, at the time limit, hung, a lost node (the screen of the nodes
    it ran on found one down or broken) or the script's error."""
    lines, at = read_progress(progress)
    common = dict(
        exit_code=ran.exit_code, started=started, ended=ended, nodes=tuple(used),
        progress=lines, progress_at=at, last_lines=ran.last_lines,
    )  # fmt: skip
    if ran.exit_code == 0:
        return StepEnd(why="done", **common)  # type: ignore[arg-type]
    if ran.warned:
        return StepEnd(why="time", **common)  # type: ignore[arg-type]
    if ran.hung:
        return StepEnd(why="hang", detail="no output for --hang-after", **common)  # type: ignore[arg-type]
    if for_good(ran.last_lines):  # the script's own, whatever the nodes: no screen needed
        return StepEnd(why="script", detail=error_line(ran.last_lines), **common)  # type: ignore[arg-type]
    reporter.status(f"the step failed (exit {ran.exit_code}): screening its nodes for a fault")
    try:
        asked = replace(
            request, spare_nodes=None, max_restarts=None,
            srun_options=[*request.srun_options, *OVERLAP],
        )  # fmt: skip
        found = screening.screen(site, asked, reporter, nodes=used)
    except UserError as exc:
        reporter.warn(
            [f"the nodes could not be screened ({exc}): the failure counts as the script's"]
        )
        found = None
    if found is not None and found.bad:
        said = "; ".join(f"{v.node} {v.status}: {v.why}" for v in found.bad)
        lost = tuple(v.node for v in found.bad)
        return StepEnd(why="node", lost=lost, detail=said, **common)  # type: ignore[arg-type]
    return StepEnd(why="script", detail=error_line(ran.last_lines), **common)  # type: ignore[arg-type]


def _ended_words(end: StepEnd) -> str:
    took = duration_text(end.ended - end.started)
    if end.why == "done":
        return f"done after {took}"
    if end.why == "time":
        return f"at the time limit after {took}"
    if end.why == "hang":
        return f"hung after {took}"
    if end.why == "node":
        return f"a node lost after {took} ({end.detail})"
    return f"the script failed after {took} (exit {end.exit_code}: {end.detail})"


def summary(ends: list[StepEnd], *, going_on: bool = False) -> str:
    """The run's one line: its steps, what each restart was for, and the time the faults cost
    (`going_on`: the job's next segment goes on without the nodes it lost)."""
    restarts = collections.Counter(e.why for e in ends[:-1])
    said = ", ".join(f"{n} {why}" for why, n in restarts.items())
    last = ends[-1]
    out = (
        "done" if last.why == "done"
        else "went on at the time limit" if last.why == "time"
        else "goes on in a next segment" if going_on
        else "stopped"
    )  # fmt: skip
    text = f"run {out}: {len(ends)} step{'s' if len(ends) > 1 else ''}"
    if restarts:
        text += (
            f", {sum(restarts.values())} restarts ({said}), {duration_text(lost_time(ends))} lost"
        )
    return text
