"""Running a launch for real: srun inside an allocation, sbatch (followed) or salloc outside.

Every path prepares the launch with prepare_launch(..., "launch") and composes it with one
plan_launch; what the user should see goes to the reporter the caller hands in.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace

from hvd_container.launcher import slurm
from hvd_container.launcher.batch import render_batch_plan
from hvd_container.launcher.compose import plan_launch
from hvd_container.launcher.prepare import prepare_launch, working_directory
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.request import LaunchRequest
from hvd_container.launcher.sites import Site

from hvd_container.core.errors import UserError

# sbatch-only options that salloc does not take
_NOT_FOR_SALLOC = ("--output=", "--error=", "--open-mode=", "--parsable")


def _run_foreground(argv: list[str], env: dict[str, str]) -> int:
    """Run srun/salloc with its output streaming through; Ctrl-C ends the step."""
    proc = subprocess.Popen(argv, env={**os.environ, **env})
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # srun ends the step on SIGTERM (a lone SIGINT only prints the tasks' state)
        proc.terminate()
        with contextlib.suppress(KeyboardInterrupt):
            proc.wait(timeout=30)
        raise


def salloc_argv(site: Site, request: LaunchRequest) -> tuple[list[str], dict[str, str], list[str]]:
    """`salloc <the allocation's options> srun ...`: an interactive allocation running the step."""
    plan = plan_launch(site, replace(request, inside_allocation=False))
    extra = [o for o in site.scheduler.sbatch_options if not o.startswith(_NOT_FOR_SALLOC)]
    return ["salloc", *plan.allocation, *extra, *plan.step], plan.env, plan.warnings


@contextlib.contextmanager
def submitted_job(
    site: Site,
    request: LaunchRequest,
    reporter: Reporter,
    *,
    private: bool = False,
    ask: bool = True,
) -> Iterator[str]:
    """Submit a prepared launch as a batch job from the current directory; a Ctrl-C until the
    end of the block cancels it. Warnings go to the reporter; yields the job id."""
    text, warnings = render_batch_plan(site, replace(request, inside_allocation=False))
    workdir = working_directory()
    with slurm.submitted(text, reporter, workdir=workdir, private=private, ask=ask) as job_id:
        reporter.warn(warnings)
        yield job_id


def execute(
    site: Site,
    request: LaunchRequest,
    reporter: Reporter,
    *,
    detach: bool = False,
    salloc: bool = False,
    batch: bool = False,
    poll: float = 0.5,
) -> int:
    """Run a launch for real and return its exit code.

    Inside an allocation ($SLURM_JOB_ID set) the composed srun line runs here, its output
    streaming through. Outside one the launch is submitted as a batch job and followed to its
    end (`detach`: return once submitted), or with `salloc` run in an interactive allocation.
    `batch` submits even from inside an allocation (`hvd-container batch --submit`).
    """
    inside = bool(os.environ.get("SLURM_JOB_ID")) and not salloc and not batch
    if detach and salloc:
        raise UserError("--detach and --salloc exclude each other: --salloc runs interactively")
    if detach and inside:
        raise UserError(
            f"--detach: inside an allocation (job {os.environ['SLURM_JOB_ID']}) the step runs "
            "here and cannot detach; run from a login shell, or use `hvd-container batch --submit --detach`"
        )
    prepared = prepare_launch(site, request, "launch")
    site, request = prepared.site, prepared.request
    if inside:
        launch = plan_launch(site, replace(request, inside_allocation=True))
        reporter.warn([*prepared.warnings, *launch.warnings])
        slurm.require_slurm("srun")
        return _run_foreground(launch.argv, launch.env)
    if salloc:
        argv, env, more = salloc_argv(site, request)
        reporter.warn([*prepared.warnings, *more])
        slurm.require_slurm("salloc")
        return _run_foreground(argv, env)
    reporter.warn(prepared.warnings)
    with submitted_job(site, request, reporter) as job_id:
        reporter.status(f"submitted batch job {job_id}")
        if detach:
            reporter.status(
                f"follow it with `hvd-container logs -f {job_id}`, cancel with `scancel {job_id}`"
            )
            return 0
        job = slurm.follow(job_id, reporter, poll=poll)
    path = slurm.output_path(job)
    if path is not None:
        reporter.status(f"job {job_id} output: {path}")
    return job.exit_code
