"""Running a launch for real: srun inside an allocation, sbatch (followed) or salloc outside.

Every path runs what one plan (launcher/plan/planner.py) composed; what the user should see goes to
the reporter the caller hands in.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import IO

from hvd_container.launcher import slurm
from hvd_container.launcher.plan.planner import Plan, plan
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.run.hang import HANG_EXIT, HangWatch, job_id_here
from hvd_container.launcher.sites.machine import ThisMachine
from hvd_container.launcher.sites.model import Site

from hvd_container.core.errors import UserError


def _run_foreground(argv: list[str], env: dict[str, str]) -> int:
    """Run srun/salloc with its output streaming through; Ctrl-C ends the step."""
    proc = subprocess.Popen(argv, executable=found_program(argv), env={**os.environ, **env})
    try:
        return proc.wait()
    except KeyboardInterrupt:
        end_step(proc)
        raise


def found_program(argv: list[str]) -> str:
    """srun/salloc as this shell's PATH finds it: the step's own variables (a PATH given with
    -e) are the step's, not where the tool looks for Slurm."""
    return shutil.which(argv[0]) or argv[0]


def end_step(proc: subprocess.Popen) -> None:
    # srun ends the step on SIGTERM (a lone SIGINT only prints the tasks' state)
    proc.terminate()
    with contextlib.suppress(KeyboardInterrupt, subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def copy_output(stream: IO[bytes], out: IO[bytes], came: queue.Queue[str]) -> None:
    """Pass a pipe through to `out` as it comes, and hand its text to the watcher."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := os.read(stream.fileno(), 65536):
        out.write(chunk)
        out.flush()
        came.put(decoder.decode(chunk))


def _run_watched(
    argv: list[str], env: dict[str, str], request: LaunchRequest, reporter: Reporter, poll: float
) -> int:
    """_run_foreground with the step's output watched for a hang (--hang-after): it passes
    through here, and the watcher ends the step (--cancel-on-hang) as Ctrl-C does."""
    proc = subprocess.Popen(
        argv, executable=found_program(argv), env={**os.environ, **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None and request.hang_after
    came: queue.Queue[str] = queue.Queue()
    copies = [
        threading.Thread(target=copy_output, args=(pipe, out.buffer, came), daemon=True)
        for pipe, out in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr))
    ]
    for copy in copies:
        copy.start()
    watch = HangWatch.for_launch(
        request.hang_after, request.cancel_on_hang, reporter, proc.terminate
    )
    # salloc makes its own job, whose id is not known here: the watchers' shared file
    job_id = job_id_here() if argv[0] == "srun" else None
    try:
        while proc.poll() is None:
            time.sleep(poll)
            text = "".join(drained(came))
            watch.seen(text, running=True, job_id=job_id)
        for copy in copies:
            copy.join(timeout=10)
    except KeyboardInterrupt:
        end_step(proc)
        raise
    return HANG_EXIT if watch.cancelled else proc.returncode


def drained(came: queue.Queue[str]) -> Iterator[str]:
    """What the queue holds now."""
    while True:
        try:
            yield came.get_nowait()
        except queue.Empty:
            return


@contextlib.contextmanager
def submitted_job(
    launch: Plan, reporter: Reporter, *, private: bool = False, ask: bool = True
) -> Iterator[str]:
    """Submit a planned launch's batch script from the current directory; a Ctrl-C until the
    end of the block cancels it. Yields the job id."""
    if launch.script is None or launch.how != "sbatch":
        raise UserError("inside an allocation a launch is a step, not a batch job")
    with slurm.submitted(launch.script, launch.argv, reporter, private=private, ask=ask) as job_id:
        yield job_id


MAX_FOLLOWED = 1000  # segments `run --until-done` follows (--max-restarts bounds them sooner)


def execute(launch: Plan, reporter: Reporter, *, detach: bool = False, poll: float = 0.5) -> int:
    """Run exactly the plan (`run --dry-run` shows it) and return its exit code.

    Inside an allocation its srun line runs here, its output streaming through; outside one
    its script is submitted as a batch job and followed to its end (`detach`: return once
    submitted), or its `salloc` line runs in an interactive allocation.
    """
    reporter.warn(launch.warnings)
    request = launch.request
    if launch.how != "sbatch":
        slurm.require_slurm(launch.argv[0])
        if request.hang_after:
            return _run_watched(launch.argv, launch.env, request, reporter, poll)
        return _run_foreground(launch.argv, launch.env)
    with submitted_job(launch, reporter) as job_id:
        reporter.status(f"submitted batch job {job_id}")
        if detach:
            reporter.status(
                f"follow it with `hvd-container logs -f {job_id}`, cancel with `scancel {job_id}`"
            )
            return 0
        watch = None
        if request.hang_after and not request.until_done:  # the job's own loop watches it
            watch = HangWatch.for_launch(
                request.hang_after, request.cancel_on_hang, reporter,
                lambda: slurm.cancel(job_id),
            )  # fmt: skip
        job = slurm.follow(job_id, reporter, poll=poll, on_poll=watch.on_poll if watch else None)
        # --until-done at a site without requeue: each segment a job of its own, followed
        jobs = [job_id]
        while request.until_done and job.exit_code == 0 and len(jobs) <= MAX_FOLLOWED:
            following = slurm.next_segment(job)
            if following is None:
                break
            reporter.status(f"job {job.job_id} goes on as job {following} (--until-done)")
            jobs.append(following)
            job = slurm.follow(following, reporter, poll=poll)
        if len(jobs) > 1:
            reporter.status(
                f"--until-done: {len(jobs)} segments, jobs {', '.join(jobs)}: the last "
                f"{job.state.lower()}"
            )
    path = slurm.output_path(job)
    if path is not None:
        reporter.status(f"job {job_id} output: {path}")
    if job.failed is not None and job.failed.summary:
        reporter.status(job.failed.summary)
    if watch is not None and watch.cancelled:
        return HANG_EXIT
    return job.exit_code


def run_plan(
    site: Site,
    request: LaunchRequest,
    *,
    salloc: bool = False,
    batch: bool = False,
    detach: bool = False,
    dry_run: bool = False,
) -> Plan:
    """The plan `run` (and `batch --submit`) executes, and its dry run shows: the one
    decision on inside or outside an allocation is the request's (request_from_options reads
    $SLURM_JOB_ID); `salloc` and `batch` ask for a job of its own even from inside one."""
    if detach and salloc:
        raise UserError("--detach and --salloc exclude each other: --salloc runs interactively")
    if detach and request.inside_allocation and not batch:
        raise UserError(
            f"--detach: inside an allocation (job {os.environ.get('SLURM_JOB_ID', '?')}) the step "
            "runs here and cannot detach; run from a login shell, or use "
            "`hvd-container batch --submit --detach`"
        )
    if salloc and request.until_done:
        raise UserError(
            "--until-done and --salloc exclude each other: a job goes on in segments as a batch "
            "job (leave --salloc out)"
        )
    if salloc or batch:
        request = replace(request, inside_allocation=False)
    machine = None if dry_run else ThisMachine()
    return plan(site, request, "run", dry_run=dry_run, machine=machine, salloc=salloc)
