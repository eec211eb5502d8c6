"""CLI commands: `run` (srun line for a site; --dry-run prints it), `batch` (sbatch script) and
`doctor` (will it start and talk?). Each maps its arguments onto launcher/run/commands.py and
prints what comes back.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from hvd_container.cli.commands.launch_options import (
    CONTEXT,
    EVERY,
    ArgsArg,
    LaunchCommand,
    ScriptArg,
    launch_parameters,
    script_arguments,
)
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.cli.terminal import TerminalReporter, safe_text
from hvd_container.core.errors import UserError
from hvd_container.launcher.plan.planner import Plan
from hvd_container.launcher.plan.request import LAUNCH, LaunchOptions
from hvd_container.launcher.run import commands

JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="One JSON object on stdout instead of the line (run: with --dry-run) or the script (batch); fields: `schema output`.",
        rich_help_panel=LAUNCH,
    ),
]


DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Print the command line and exit.", rich_help_panel=LAUNCH)
]

DetachOpt = Annotated[
    bool,
    typer.Option(
        "--detach", help="Outside an allocation: submit and return.", rich_help_panel=LAUNCH
    ),
]

SallocOpt = Annotated[
    bool,
    typer.Option(
        "--salloc",
        help="Outside an allocation: run interactively under salloc instead of sbatch.",
        rich_help_panel=LAUNCH,
    ),
]

SubmitOpt = Annotated[
    bool,
    typer.Option(
        "--submit",
        help="Submit it with sbatch and follow the job to its end.",
        rich_help_panel=LAUNCH,
    ),
]

SubmitDetachOpt = Annotated[
    bool,
    typer.Option("--detach", help="With --submit: return once submitted.", rich_help_panel=LAUNCH),
]


def dry_run_record(launch: Plan) -> dict[str, Any]:
    """What a dry run shows, as data (json_output's `run-dry-run` record)."""
    return {
        "site": launch.site.name,
        "runtime": launch.launch.runtime.kind,
        "image": launch.image,
        "how": launch.how,
        "argv": launch.argv,
        "env": launch.env,
        "command": launch.shell_line(),
        "script": launch.script if launch.how == "sbatch" else None,
        "inside_allocation": launch.request.inside_allocation,
        "allocation": launch.allocation,
        "step": launch.step,
        "files": launch.files,
        "controller": controller_record(launch),
        **layout_record(launch),
        "warnings": launch.warnings,
    }


def layout_record(launch: Plan) -> dict[str, int | None]:
    """The nodes, tasks and ranks the launch asks for (json_output's `run-dry-run`)."""
    layout = launch.launch.layout
    return {
        "nodes": layout.nodes,
        "tasks": layout.tasks,
        "tasks_per_node": layout.tasks_on_each_node,
        "ranks": layout.ranks,
        "gpus_per_node": layout.gpus_per_node,
    }


def controller_record(launch: Plan) -> dict[str, str]:
    """The controller the launch uses and why (asked, declared, the script, the default)."""
    return {"name": launch.launch.controller.name, "why": launch.launch.controller.why}


@launch_parameters(*EVERY)
def run(
    ctx: typer.Context,
    script: ScriptArg,
    args: ArgsArg = None,
    dry_run: DryRunOpt = False,
    detach: DetachOpt = False,
    salloc: SallocOpt = False,
    json: JsonOpt = False,
    **options: Any,
) -> None:
    """Run SCRIPT on the site's GPUs in a container with srun.

    Inside an allocation the srun line runs here; outside one the launch is submitted as a
    batch job and followed. --dry-run prints what would run instead: the srun line, or the
    sbatch command with the script it submits.
    """
    with json_errors(json):
        args = script_arguments(ctx, script, args)
        if json and not dry_run:
            raise UserError("--json goes with --dry-run (a launch prints the job's own output)")
        reporter = TerminalReporter()
        if not dry_run:
            raise typer.Exit(
                commands.run(
                    reporter,
                    script,
                    args,
                    detach=detach,
                    salloc=salloc,
                    options=LaunchOptions(**options),
                )
                or 0
            )
        launch = commands.dry_run(
            reporter, script, args, salloc=salloc, options=LaunchOptions(**options)
        )
    if json:
        emit(dry_run_record(launch))
    else:
        typer.echo(launch.shell_line())


@launch_parameters(*EVERY)
def batch(
    ctx: typer.Context,
    script: ScriptArg,
    args: ArgsArg = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            help="Write the sbatch script to this file, owner-only (default, or -: stdout). Not sbatch's -o/--output, the job's stdout file: that is --job-output.",
            rich_help_panel=LAUNCH,
        ),
    ] = None,
    submit: SubmitOpt = False,
    detach: SubmitDetachOpt = False,
    json: JsonOpt = False,
    **options: Any,
) -> None:
    """Write the sbatch script that runs SCRIPT like `run` would (--submit: submit it)."""
    with json_errors(json):
        args = script_arguments(ctx, script, args)
        if json and submit:
            raise UserError("--json goes without --submit (a submitted job prints its own output)")
        if detach and not submit:
            raise UserError("--detach goes with --submit (without it nothing is submitted)")
        reporter = TerminalReporter()
        if submit:
            raise typer.Exit(
                commands.submit(reporter, script, args, LaunchOptions(**options), detach=detach)
                or 0
            )
        launch = commands.batch(
            reporter, script, args, output=output, options=LaunchOptions(**options)
        )
    path = None if output in (None, "-") else output
    assert launch.script is not None
    if json:
        emit(
            {
                "site": launch.site.name,
                "path": path,
                "script": launch.script,
                "argv": ["sbatch", path] if path else ["sbatch"],  # the script on stdin
                "controller": controller_record(launch),
                "warnings": launch.warnings,
            }
        )
    elif path is None:
        typer.echo(launch.script, nl=False)
    else:
        typer.echo(f"wrote {path}", err=True)


_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "SKIP", "n/a": "N/A "}


def doctor_lines(results: list[Any]) -> list[str]:
    """One line a check; a reason said already is named, not repeated; then the counts."""
    lines: list[str] = []
    first: dict[str, str] = {}  # reason -> the check that said it first
    for r in results:
        said = first.get(r.message) if r.status in ("skip", "n/a") else None
        message = f"same reason as {said}" if said else r.message
        first.setdefault(r.message, r.check)
        lines.append(f"{_MARK[r.status]}  {r.check:<18} {message}")
    counts = {status: sum(r.status == status for r in results) for status in _MARK}
    lines.append(", ".join(f"{n} {status}" for status, n in counts.items()))
    return lines


DOCTOR_PARAMETERS = (
    "site", "image", "recipe", "ntasks", "nodes", "ntasks_per_node", "gpus_per_node", "mpi",
    "controller", "runtime", "modules", "env", "time", "partition", "account", "comment",
)  # fmt: skip


@launch_parameters(*DOCTOR_PARAMETERS)
def doctor(
    ctx: typer.Context,
    script: Annotated[
        str | None,
        typer.Argument(
            help="The training script `run` would launch (optional): checked, and its controller detected, as run does."
        ),
    ] = None,
    args: ArgsArg = None,
    smoke: Annotated[
        bool,
        typer.Option(
            "--smoke",
            help="Also run a short job in the container on the nodes: rank and size from each "
            "controller, an allreduce checked and its bandwidth (a batch job; seconds once queued).",
        ),
    ] = False,
    screen: Annotated[
        bool,
        typer.Option(
            "--screen",
            help="Inside an allocation: screen its nodes with short steps of the smoke program, "
            "each node alone, then pairs over the network; name each broken, down or slow node "
            "and why, and write them to an exclude list.",
        ),
    ] = False,
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="With --screen: write the bus bandwidth it found (the median best pair) into "
            "your override of the site's profile as expected_busbw, with its source and date.",
        ),
    ] = False,
    exclude_file: Annotated[
        str | None,
        typer.Option(
            "--exclude-file",
            help="With --screen: where the bad nodes go, one a line (srun --exclude=./FILE); "
            "default hvd-screen-JOBID.exclude here.",
        ),
    ] = None,
    json: Annotated[
        bool, typer.Option("--json", help="One JSON object on stdout (fields: `schema output`).")
    ] = False,
    **options: Any,
) -> None:
    """Check that IMAGE will start and communicate on SITE before a job waits in the queue.

    Every check of a launch, one pass / warn / fail / skip line each with the fix (skip: it
    lacked what it needs to judge, and says what); --smoke then runs the image's controllers
    on the nodes; --screen screens the nodes of the allocation it runs in. Exits 1 on a fail.
    """
    with json_errors(json):
        args = script_arguments(ctx, script, args) if script else None
        site, report = commands.doctor(
            TerminalReporter(),
            LaunchOptions(**options),
            smoke=smoke,
            screen=screen,
            record=record,
            exclude_file=exclude_file,
            script=script,
            args=args,
        )

    def rows(results: list[Any]) -> list[dict[str, str]]:
        return [{"check": r.check, "status": r.status, "message": r.message} for r in results]

    if json:
        emit(
            {
                "site": site.name,
                "image": options.get("image"),
                "ok": not report.failed,
                "checks": rows(report.checks),
                "smoke": rows(report.smoke),
                "screen": report.screen.to_record() if report.screen else None,
            }
        )
    else:
        for line in doctor_lines([*report.checks, *report.smoke]):
            typer.echo(safe_text(line))  # profile values and job output
    if report.failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `run`, `batch` and `doctor` to the app."""
    app.command("run", context_settings=CONTEXT, cls=LaunchCommand)(run)
    app.command("batch", context_settings=CONTEXT, cls=LaunchCommand)(batch)
    app.command("doctor", context_settings=CONTEXT, cls=LaunchCommand)(doctor)
