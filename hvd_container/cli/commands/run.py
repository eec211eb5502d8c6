"""CLI commands: `run` (srun line for a site; --dry-run prints it) and `batch` (sbatch script).

Kept light at import time: the launcher is imported inside the commands, and nothing on this
path imports docker, requests or spython.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from hvd_container.cli.commands.launch_options import (
    ARGS_HELP,
    CONTEXT,
    DEFAULTS,
    LAUNCH,
    OPTIONS,
    SCRIPT_HELP,
    build_request,
    dry_run_output,
)
from hvd_container.cli.completion import complete_image, complete_recipe, complete_site
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.cli.terminal import TerminalReporter, warn
from hvd_container.core.errors import UserError

# values only hvd-container knows how to complete
_COMPLETERS = {"site": complete_site, "recipe": complete_recipe, "image": complete_image}


def _option(name: str) -> Any:
    """The typer option for a row of the shared table (its flags, help and --help panel)."""
    opt = OPTIONS[name]
    # counts arrive as text: build_request reads them as Slurm does (plain_count)
    extra: dict[str, Any] = {"metavar": "<int>"} if opt.kind == "int" else {}
    if name in _COMPLETERS:
        extra["autocompletion"] = _COMPLETERS[name]
    return typer.Option(*opt.flags, help=opt.help, rich_help_panel=opt.panel, **extra)


SiteOpt = Annotated[str | None, _option("site")]
ImageOpt = Annotated[str | None, _option("image")]
RecipeOpt = Annotated[str | None, _option("recipe")]
NtasksOpt = Annotated[str | None, _option("ntasks")]
NodesOpt = Annotated[str | None, _option("nodes")]
PerNodeOpt = Annotated[str | None, _option("ntasks_per_node")]
GpusNodeOpt = Annotated[str | None, _option("gpus_per_node")]
GpusTaskOpt = Annotated[str | None, _option("gpus_per_task")]
CpusOpt = Annotated[str | None, _option("cpus_per_task")]
MpiOpt = Annotated[str | None, _option("mpi")]
ControllerOpt = Annotated[str, _option("controller")]
RuntimeOpt = Annotated[str | None, _option("runtime")]
ModuleOpt = Annotated[list[str] | None, _option("modules")]
BindOpt = Annotated[list[str] | None, _option("binds")]
EnvOpt = Annotated[list[str] | None, _option("env")]
WorkdirOpt = Annotated[str | None, _option("workdir")]
JobNameOpt = Annotated[str | None, _option("job_name")]
TimeOpt = Annotated[str | None, _option("time")]
PartitionOpt = Annotated[str | None, _option("partition")]
AccountOpt = Annotated[str | None, _option("account")]
QosOpt = Annotated[str | None, _option("qos")]
ConstraintOpt = Annotated[str | None, _option("constraint")]
CommentOpt = Annotated[str | None, _option("comment")]
JobOutputOpt = Annotated[str | None, _option("job_output")]
JobErrorOpt = Annotated[str | None, _option("job_error")]
DryRunOpt = Annotated[bool, _option("dry_run")]
DetachOpt = Annotated[bool, _option("detach")]
SallocOpt = Annotated[bool, _option("salloc")]
JsonOpt = Annotated[bool, _option("json")]
ScriptArg = Annotated[str, typer.Argument(help=SCRIPT_HELP)]
ArgsArg = Annotated[list[str] | None, typer.Argument(help=ARGS_HELP)]


def run(
    script: ScriptArg,
    args: ArgsArg = None,
    site: SiteOpt = None,
    image: ImageOpt = None,
    recipe: RecipeOpt = None,
    ntasks: NtasksOpt = None,
    nodes: NodesOpt = None,
    ntasks_per_node: PerNodeOpt = None,
    gpus_per_node: GpusNodeOpt = None,
    gpus_per_task: GpusTaskOpt = None,
    cpus_per_task: CpusOpt = None,
    mpi: MpiOpt = None,
    controller: ControllerOpt = DEFAULTS["controller"],
    runtime: RuntimeOpt = None,
    modules: ModuleOpt = None,
    binds: BindOpt = None,
    env: EnvOpt = None,
    workdir: WorkdirOpt = None,
    job_name: JobNameOpt = None,
    time: TimeOpt = None,
    partition: PartitionOpt = None,
    account: AccountOpt = None,
    qos: QosOpt = None,
    constraint: ConstraintOpt = None,
    comment: CommentOpt = None,
    job_output: JobOutputOpt = None,
    job_error: JobErrorOpt = None,
    dry_run: DryRunOpt = False,
    detach: DetachOpt = False,
    salloc: SallocOpt = False,
    json: JsonOpt = False,
) -> None:
    """Run SCRIPT on the site's GPUs in a container with srun.

    Inside an allocation the srun line runs here; outside one the launch is submitted as a
    batch job and followed. --dry-run prints the command line instead.
    """
    if dry_run:
        text, warnings = dry_run_output(dict(locals()))
        warn(warnings)
        typer.echo(text)
        return
    if json:
        with json_errors(True):
            raise UserError("--json goes with --dry-run (a launch prints the job's own output)")
    site_obj, request = build_request(
        site=site, script=script, args=args, image=image, recipe=recipe, ntasks=ntasks,
        nodes=nodes, ntasks_per_node=ntasks_per_node, gpus_per_node=gpus_per_node,
        gpus_per_task=gpus_per_task, cpus_per_task=cpus_per_task, mpi=mpi,
        controller=controller, runtime=runtime, modules=modules, binds=binds, env=env,
        workdir=workdir, job_name=job_name, time=time, partition=partition, account=account,
        qos=qos, constraint=constraint, comment=comment, job_output=job_output,
        job_error=job_error,
    )  # fmt: skip
    from hvd_container.launcher.execute import execute

    code = execute(site_obj, request, TerminalReporter(), detach=detach, salloc=salloc)
    raise typer.Exit(code or 0)


def batch(
    script: ScriptArg,
    args: ArgsArg = None,
    site: SiteOpt = None,
    image: ImageOpt = None,
    recipe: RecipeOpt = None,
    ntasks: NtasksOpt = None,
    nodes: NodesOpt = None,
    ntasks_per_node: PerNodeOpt = None,
    gpus_per_node: GpusNodeOpt = None,
    gpus_per_task: GpusTaskOpt = None,
    cpus_per_task: CpusOpt = None,
    mpi: MpiOpt = None,
    controller: ControllerOpt = DEFAULTS["controller"],
    runtime: RuntimeOpt = None,
    modules: ModuleOpt = None,
    binds: BindOpt = None,
    env: EnvOpt = None,
    workdir: WorkdirOpt = None,
    job_name: JobNameOpt = None,
    time: TimeOpt = None,
    partition: PartitionOpt = None,
    account: AccountOpt = None,
    qos: QosOpt = None,
    constraint: ConstraintOpt = None,
    comment: CommentOpt = None,
    job_output: JobOutputOpt = None,
    job_error: JobErrorOpt = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            help="Write the sbatch script to this file, owner-only (default, or -: stdout). Not sbatch's -o/--output, the job's stdout file: that is --job-output.",
            rich_help_panel=LAUNCH,
        ),
    ] = None,
    submit: Annotated[
        bool,
        typer.Option(
            "--submit",
            help="Submit it with sbatch and follow the job to its end.",
            rich_help_panel=LAUNCH,
        ),
    ] = False,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach", help="With --submit: return once submitted.", rich_help_panel=LAUNCH
        ),
    ] = False,
    json: JsonOpt = False,
) -> None:
    """Write the sbatch script that runs SCRIPT like `run` would (--submit: submit it)."""
    with json_errors(json):
        if json and submit:
            raise UserError("--json goes without --submit (a submitted job prints its own output)")
        site_obj, request = build_request(
            site=site, script=script, args=args, image=image, recipe=recipe, ntasks=ntasks,
            nodes=nodes, ntasks_per_node=ntasks_per_node, gpus_per_node=gpus_per_node,
            gpus_per_task=gpus_per_task, cpus_per_task=cpus_per_task, mpi=mpi,
            controller=controller, runtime=runtime, modules=modules, binds=binds, env=env,
            workdir=workdir, job_name=job_name, time=time, partition=partition,
            account=account, qos=qos, constraint=constraint, comment=comment,
            job_output=job_output, job_error=job_error,
        )  # fmt: skip
        if submit:
            from hvd_container.launcher.execute import execute

            reporter = TerminalReporter()
            raise typer.Exit(execute(site_obj, request, reporter, detach=detach, batch=True) or 0)
        if detach:
            raise UserError("--detach goes with --submit (without it nothing is submitted)")
        from hvd_container.launcher.batch import render_batch_plan, write_batch_script
        from hvd_container.launcher.prepare import prepare_launch

        # prepared as for a run (a local image is unpacked), so the script runs as written
        prepared = prepare_launch(site_obj, request, "write")
        text, script_warnings = render_batch_plan(prepared.site, prepared.request)
        warnings = list(dict.fromkeys([*prepared.warnings, *script_warnings]))
        path = None if output in (None, "-") else output
        if path is not None:
            write_batch_script(path, text)
    warn(warnings)
    if json:
        emit(
            {
                "site": prepared.site.name,
                "path": path,
                "script": text,
                "argv": ["sbatch", path] if path else ["sbatch"],  # the script on stdin
                "warnings": warnings,
            }
        )
    elif path is None:
        typer.echo(text, nl=False)
    else:
        typer.echo(f"wrote {path}", err=True)


SmokeOpt = Annotated[
    bool,
    typer.Option(
        "--smoke",
        help="Also run a short job in the container on the nodes: rank and size from each "
        "controller, an allreduce checked and its bandwidth (a batch job; seconds once queued).",
    ),
]
_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL"}


def doctor(
    site: SiteOpt = None,
    image: ImageOpt = None,
    recipe: RecipeOpt = None,
    ntasks: NtasksOpt = None,
    nodes: NodesOpt = None,
    ntasks_per_node: PerNodeOpt = None,
    gpus_per_node: GpusNodeOpt = None,
    mpi: MpiOpt = None,
    controller: ControllerOpt = DEFAULTS["controller"],
    runtime: RuntimeOpt = None,
    modules: ModuleOpt = None,
    env: EnvOpt = None,
    time: TimeOpt = None,
    partition: PartitionOpt = None,
    account: AccountOpt = None,
    comment: CommentOpt = None,
    smoke: SmokeOpt = False,
    json: JsonOpt = False,
) -> None:
    """Check that IMAGE will start and communicate on SITE before a job waits in the queue.

    Static checks from the image's facts and the site profile (architecture, MPI and PMI,
    controllers, CUDA and driver, NCCL's network, where the image lies), one pass / warn /
    fail line each with the fix; --smoke then runs Horovod on the nodes. Exits 1 on a fail.
    """
    with json_errors(json):
        site_obj, request = build_request(
            site=site, script="doctor", image=image, recipe=recipe, ntasks=ntasks, nodes=nodes,
            ntasks_per_node=ntasks_per_node, gpus_per_node=gpus_per_node, mpi=mpi,
            controller=controller, runtime=runtime, modules=modules, env=env, time=time,
            partition=partition, account=account, comment=comment, lightning=False,
        )  # fmt: skip
        from hvd_container.launcher.doctor import diagnose
        from hvd_container.launcher.doctor import smoke as run_smoke

        report = diagnose(site_obj, request)
        if smoke and not report.failed:
            run_smoke(site_obj, request, report)
        elif smoke:
            report.add("smoke", "fail", "not run: fix the failing checks first")
    rows = [{"check": r.check, "status": r.status, "message": r.message} for r in report.results]
    if json:
        emit({"site": site_obj.name, "image": image, "ok": not report.failed, "checks": rows})
    else:
        for r in report.results:
            typer.echo(f"{_MARK[r.status]}  {r.check:<18} {r.message}")
    if report.failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `run`, `batch` and `doctor` to the app."""
    app.command("run", context_settings=CONTEXT)(run)
    app.command("batch", context_settings=CONTEXT)(batch)
    app.command("doctor")(doctor)
