"""CLI commands: `jobs` (the user's Slurm jobs) and `logs JOBID` (a job's output)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from hvd_container.cli.commands.common import JsonOpt
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.cli.terminal import TerminalReporter
from hvd_container.core.errors import UserError
from hvd_container.core.text import ascii_digits
from hvd_container.launcher import slurm
from hvd_container.launcher.run import hang, run_record

jobs_app = typer.Typer(invoke_without_command=True)  # its help: the callback's


@jobs_app.callback()
def jobs(
    ctx: typer.Context,
    user: Annotated[
        str | None, typer.Option("-u", "--user", help="Whose jobs (default: you).")
    ] = None,
    active: Annotated[
        bool, typer.Option("--active", help="Only pending and running jobs.")
    ] = False,
    json_output: JsonOpt = False,
) -> None:
    """List your Slurm jobs, recently finished ones included."""

    if ctx.invoked_subcommand is not None:
        return
    with json_errors(json_output):
        who = user or slurm.current_user()
        rows = slurm.list_jobs(who, finished=not active)
    if json_output:
        fields = ("job_id", "name", "state", "user", "elapsed", "nodes", "reason")
        records = [
            {
                **{f: getattr(j, f) for f in fields},
                "down_nodes": slurm.down_nodes(j.nodes) if j.state == "NODE_FAIL" else [],
            }
            for j in rows
        ]
        emit({"user": who, "jobs": records})
        return
    if not rows:
        typer.echo("no jobs")
        return
    header = ("JOBID", "NAME", "STATE", "TIME", "NODES/REASON")
    table = [header] + [(j.job_id, j.name, j.state, j.elapsed, _where(j)) for j in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    for row in table:
        typer.echo(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1]
        )


@jobs_app.command("show")
def show(
    job_id: Annotated[str, typer.Argument(help="A job of the run (any of its segments).")],
    json_output: JsonOpt = False,
) -> None:
    """A run that restarts (--until-done, --max-restarts), from the folder it started in:
    each step with its job, nodes, start and end, why it ended, the checkpoint it resumed
    from and the time the fault cost; then the run's total."""

    with json_errors(json_output):
        steps = run_record.run_of(job_id, run_record.runs_folder())
    lost = sum(s.lost for s in steps)
    if json_output:
        emit(
            {"job": job_id, "steps": [s.to_record() for s in steps], "lost_seconds": round(lost, 1)}
        )
        return
    for s in steps:
        typer.echo(
            f"job {s.job} step {s.step} (segment {s.segment}) on {','.join(s.nodes) or '?'}: "
            f"{_clock(s.started)} to {_clock(s.ended)}, {run_record.why_words(s)}"
            + (f"; resumed from {s.resumed_from}" if s.resumed_from else "")
            + (f"; lost {hang.duration_text(s.lost)}" if s.lost else "")
        )
    restarts = len(steps) - 1
    typer.echo(
        f"{len(steps)} steps, {restarts} restarts, {hang.duration_text(lost)} lost; the last: "
        f"{run_record.why_words(steps[-1])}"
    )


def _clock(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _where(job: slurm.Job) -> str:
    """The job's nodes (a job that a node failure ended names the node that went down), or
    why it waits."""
    if job.state == "NODE_FAIL":
        down = slurm.down_nodes(job.nodes)
        if down:
            return f"{job.nodes} (down: {','.join(down)})"
    return job.nodes or (f"({job.reason})" if job.reason else "")


def logs(
    job_id: Annotated[str, typer.Argument(help="Job id (see `hvd-container jobs`).")],
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Keep printing until the job ends.")
    ] = False,
    hang_after: Annotated[
        str | None,
        typer.Option(
            "--hang-after",
            help="With -f: when the job prints nothing for this long (90s, 10m, 1h), say so "
            "and, for a job started with --hang-after, show each Python process's stacks.",
        ),
    ] = None,
    cancel_on_hang: Annotated[
        bool,
        typer.Option("--cancel-on-hang", help="With --hang-after: then end the job (exit 124)."),
    ] = False,
) -> None:
    """Print a job's output: its stdout file, then its stderr file.

    -f follows both to the job's end (the stderr file to stderr) and exits with its code."""

    reporter = TerminalReporter()

    if not ascii_digits(job_id):
        raise UserError(
            f"JOBID: {job_id!r} is not a job id (allowed: digits, see `hvd-container jobs`)"
        )
    if (hang_after is not None or cancel_on_hang) and not follow:
        raise UserError("--hang-after and --cancel-on-hang go with -f/--follow")
    if cancel_on_hang and hang_after is None:
        raise UserError("--cancel-on-hang goes with --hang-after DURATION")
    if not follow:
        slurm.print_log(job_id, reporter)
        return
    after = None if hang_after is None else hang.parse_duration(hang_after)
    raise typer.Exit(hang.follow_job(job_id, reporter, after=after, cancel=cancel_on_hang))


def register(app: typer.Typer) -> None:
    """Add `jobs` and `logs` to the app."""
    app.add_typer(jobs_app, name="jobs")
    app.command("logs")(logs)
