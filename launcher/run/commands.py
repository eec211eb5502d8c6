"""The launch commands as library functions: each takes the launch parameters (a
`LaunchOptions`, as the command line gives them) and its own, does the whole flow, and returns
what the CLI prints. Warnings go to the reporter the caller hands in.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from hvd_container.launcher.plan.planner import Plan, plan
from hvd_container.launcher.plan.request import (
    LaunchOptions,
    LaunchRequest,
    check,
    request_from_options,
    restarting,
)
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.run.execute import execute, run_plan
from hvd_container.launcher.script.batch import write_batch_script
from hvd_container.launcher.sites.loader import record_expected_busbw
from hvd_container.launcher.sites.model import Site

from hvd_container.core.atomic import output_file, write_output
from hvd_container.core.errors import UserError
from hvd_container.core.text import ascii_digits

if TYPE_CHECKING:
    from hvd_container.launcher.run.doctor import Report
    from hvd_container.launcher.run.jupyter import JupyterSession


def _request(
    reporter: Reporter, script: str, args: list[str] | None, options: LaunchOptions
) -> tuple[Site, LaunchRequest]:
    passed_over: list[str] = []
    chosen: list[str] = []
    site, request = request_from_options(script, args, options, warnings=passed_over, notes=chosen)
    reporter.warn(passed_over)
    reporter.note(chosen)
    return site, request


def dry_run(
    reporter: Reporter,
    script: str,
    args: list[str] | None,
    *,
    salloc: bool = False,
    options: LaunchOptions,
) -> Plan:
    """`run --dry-run`: the plan `run` would execute, nothing run or prepared."""
    site, request = _request(reporter, script, args, options)
    launch = run_plan(site, request, salloc=salloc, dry_run=True)
    reporter.warn(launch.warnings)
    if restarting(request) and request.inside_allocation:
        reporter.warn(
            [
                "--max-restarts: this step runs on -N of the allocation's nodes (--nodelist), "
                "and starts again on good ones after a hang, a lost node or a script error "
                "after progress"
            ]
        )
    if request.screen and request.inside_allocation:  # outside one the job's line shows it
        reporter.warn(
            [
                "--screen: the nodes are screened first; this step then runs with "
                "--exclude=<the bad nodes> (and fewer nodes under --screen-policy shrink)"
            ]
        )
    return launch


def run(
    reporter: Reporter,
    script: str,
    args: list[str] | None,
    *,
    detach: bool = False,
    salloc: bool = False,
    options: LaunchOptions,
) -> int:
    """`run`: the step here inside an allocation, else a batch job followed to its end;
    `--screen` first screens the allocation's nodes and runs on the good ones."""
    # the node screen and the restart loop only where a step runs: about 5 ms of a dry run
    from hvd_container.launcher.run import screen as screening
    from hvd_container.launcher.run.step_loop import run_restarting

    site, request = _request(reporter, script, args, options)
    if request.screen and request.inside_allocation:  # outside one, the job screens itself
        request = screening.screened(site, request, reporter)
    if restarting(request) and request.inside_allocation:  # outside one, the job restarts
        check(site, request)
        return run_restarting(site, request, reporter)
    return execute(run_plan(site, request, salloc=salloc, detach=detach), reporter, detach=detach)


def batch(
    reporter: Reporter,
    script: str,
    args: list[str] | None,
    *,
    output: str | None = None,
    options: LaunchOptions,
) -> Plan:
    """`batch`: the script `run` would submit (a local image prepared so that it runs as
    written), written to `output` (owner-only) unless that is None or "-"."""
    site, request = _request(reporter, script, args, options)
    launch = plan(site, request, "batch")
    if output not in (None, "-"):
        assert launch.script is not None
        write_batch_script(output, launch.script)
    reporter.warn(launch.warnings)  # once the script is there: a failed write says only that
    return launch


def submit(
    reporter: Reporter,
    script: str,
    args: list[str] | None,
    options: LaunchOptions,
    *,
    detach: bool = False,
) -> int:
    """`batch --submit`: submit that script (from inside an allocation too) and follow it."""
    site, request = _request(reporter, script, args, options)
    return execute(run_plan(site, request, batch=True, detach=detach), reporter, detach=detach)


def doctor(
    reporter: Reporter,
    options: LaunchOptions,
    *,
    smoke: bool = False,
    screen: bool = False,
    record: bool = False,
    exclude_file: str | None = None,
    script: str | None = None,
    args: list[str] | None = None,
) -> tuple[Site, Report]:
    """`doctor [SCRIPT [ARGS]]`: every check of the launch `run` would make of the script
    (its controller detected as `run` does), then (`smoke`) a short job on the nodes, and
    (`screen`, inside an allocation) the screen of its nodes: the bad ones written to
    `exclude_file` (default hvd-screen-JOBID.exclude here), the figure it found recorded in
    the user's profile (`record`)."""
    # doctor's checks and the node screen only here: about 4 ms of a dry run
    from hvd_container.launcher.run import doctor as doctor_checks
    from hvd_container.launcher.run import screen as screening

    if record and not screen:
        raise UserError("--record goes with --screen (it records the bus bandwidth a screen found)")
    if screen and exclude_file:  # a file it could not write: said before the nodes are screened
        output_file(exclude_file, "--exclude-file")
    site, request = _request(reporter, script or "doctor", args, options)
    if not script:  # the checks that read the script say it was not given
        request = replace(request, script_given=False)
    report = doctor_checks.diagnose(site, request)
    if (smoke or screen) and report.failed:
        report.add("smoke", "fail", "not run: fix the failing checks first")
        return site, report
    if smoke:
        doctor_checks.smoke(site, request, report)
    if screen:
        found = screening.screen(site, request, reporter)
        report.screen = found
        doctor_checks.add_screen(report, found)
        if found.bad:
            path = exclude_file or exclude_file_name(os.environ.get("SLURM_JOB_ID"))
            write_output(path, "--exclude-file", "".join(f"{v.node}\n" for v in found.bad))
            report.add("screen", "fail", f"exclude list: {path} (srun --exclude=./{path})")
        if record and found.reference is not None:
            where = record_expected_busbw(
                site,
                found.reference,
                f"doctor --screen in job {os.environ.get('SLURM_JOB_ID', '?')} on "
                f"{len(found.nodes)} nodes: the median best pair's all-reduce bus bandwidth",
            )
            report.add(
                "screen-record", "pass", f"expected_busbw {found.reference:.1f} MB/s in {where}"
            )
        elif record:
            report.add("screen-record", "skip", "no pair ran: nothing to record")
    return site, report


def jupyter(reporter: Reporter, options: LaunchOptions, *, timeout: float = 300) -> JupyterSession:
    """`jupyter`: JupyterLab in the image on one compute node, once it answers."""
    # the Jupyter job only for `jupyter`: about 1.5 ms of every other command
    from hvd_container.launcher.run import jupyter as jupyter_job

    site, request = _request(reporter, "jupyter", [], options)
    return jupyter_job.start(site, request, reporter, timeout=timeout)


def jupyter_dry_run(reporter: Reporter, options: LaunchOptions) -> Plan:
    """`jupyter --dry-run`: the job `jupyter` would submit (its port and token chosen as a
    launch chooses them), nothing prepared or submitted."""
    # the Jupyter job only for `jupyter`: about 1.5 ms of every other command
    from hvd_container.launcher.run import jupyter as jupyter_job

    site, request = _request(reporter, "jupyter", [], options)
    launch = jupyter_job.jupyter_plan(
        site, request, jupyter_job.random_port(), jupyter_job.new_token(), dry_run=True
    )
    reporter.warn(launch.warnings)
    return launch


def exclude_file_name(job_id: str | None) -> str:
    """doctor --screen's exclude list: hvd-screen-JOBID.exclude, the id a job id as this tool
    takes them (ASCII digits), else `job`: the variable names a file, never a path."""
    return f"hvd-screen-{job_id if job_id and ascii_digits(job_id) else 'job'}.exclude"
