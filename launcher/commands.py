"""The launch commands as library functions: each takes the launch parameters (a
`LaunchOptions`, as the command line gives them) and its own, does the whole flow, and returns
what the CLI prints. Warnings go to the reporter the caller hands in.
"""

from __future__ import annotations

from hvd_container.launcher import doctor as doctor_checks
from hvd_container.launcher import jupyter as jupyter_job
from hvd_container.launcher.batch import write_batch_script
from hvd_container.launcher.execute import execute, run_plan
from hvd_container.launcher.plan import Plan, plan
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.request import LaunchOptions, LaunchRequest, request_from_options
from hvd_container.launcher.sites import Site


def _request(
    reporter: Reporter, script: str, args: list[str] | None, options: LaunchOptions
) -> tuple[Site, LaunchRequest]:
    passed_over: list[str] = []
    site, request = request_from_options(script, args, options, warnings=passed_over)
    reporter.warn(passed_over)
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
    """`run`: the step here inside an allocation, else a batch job followed to its end."""
    site, request = _request(reporter, script, args, options)
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
    reporter: Reporter, options: LaunchOptions, *, smoke: bool = False
) -> tuple[Site, doctor_checks.Report]:
    """`doctor`: every check of the launch, then (`smoke`) a short job on the nodes."""
    site, request = _request(reporter, "doctor", [], options)
    report = doctor_checks.diagnose(site, request)
    if smoke and not report.failed:
        doctor_checks.smoke(site, request, report)
    elif smoke:
        report.add("smoke", "fail", "not run: fix the failing checks first")
    return site, report


def jupyter(
    reporter: Reporter, options: LaunchOptions, *, timeout: float = 300
) -> jupyter_job.JupyterSession:
    """`jupyter`: JupyterLab in the image on one compute node, once it answers."""
    site, request = _request(reporter, "jupyter", [], options)
    return jupyter_job.start(site, request, reporter, timeout=timeout)


def jupyter_dry_run(reporter: Reporter, options: LaunchOptions) -> Plan:
    """`jupyter --dry-run`: the job `jupyter` would submit (its port and token chosen as a
    launch chooses them), nothing prepared or submitted."""
    site, request = _request(reporter, "jupyter", [], options)
    launch = jupyter_job.jupyter_plan(
        site, request, jupyter_job.random_port(), jupyter_job.new_token(), dry_run=True
    )
    reporter.warn(launch.warnings)
    return launch
