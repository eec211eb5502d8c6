"""Running a launch for real: srun inside an allocation, sbatch (followed) or salloc outside.

Every path runs what one plan (launcher/plan.py) composed; what the user should see goes to
the reporter the caller hands in.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace

from hvd_container.launcher import slurm
from hvd_container.launcher.machine import ThisMachine
from hvd_container.launcher.plan import Plan, plan
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.request import LaunchRequest
from hvd_container.launcher.runtimes import working_directory
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


def salloc_argv(launch: Plan) -> list[str]:
    """`salloc <the allocation's options> srun ...`: an interactive allocation running the step."""
    extra = [o for o in launch.site.scheduler.sbatch_options if not o.startswith(_NOT_FOR_SALLOC)]
    return ["salloc", *launch.allocation, *extra, *launch.step]


@contextlib.contextmanager
def submitted_job(
    launch: Plan, reporter: Reporter, *, private: bool = False, ask: bool = True
) -> Iterator[str]:
    """Submit a planned launch's batch script from the current directory; a Ctrl-C until the
    end of the block cancels it. Yields the job id."""
    if launch.script is None:
        raise UserError("inside an allocation a launch is a step, not a batch job")
    workdir = working_directory()
    with slurm.submitted(
        launch.script, reporter, workdir=workdir, private=private, ask=ask
    ) as job_id:
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
    launch = plan(site, replace(request, inside_allocation=inside), "run", machine=ThisMachine())
    reporter.warn(launch.warnings)
    if inside:
        slurm.require_slurm("srun")
        return _run_foreground(launch.argv, launch.env)
    if salloc:
        slurm.require_slurm("salloc")
        return _run_foreground(salloc_argv(launch), launch.env)
    with submitted_job(launch, reporter) as job_id:
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
    if job.failed is not None and job.failed.summary:
        reporter.status(job.failed.summary)
    return job.exit_code
