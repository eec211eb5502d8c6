"""CLI commands: `run` (srun line for a site; --dry-run prints it) and `batch` (sbatch script).

Kept light at import time: the launcher is imported inside the commands, and nothing on this
path imports docker, requests or spython.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hvd_container.errors import UserError

if TYPE_CHECKING:
    from launcher.compose import LaunchRequest
    from launcher.sites import Site

_LAUNCH = "Launch"
_RES = "Resources"
_SCHED = "Scheduler"
_CT = "Container"

SiteOpt = Annotated[
    str | None,
    typer.Option(
        "--site",
        help="Site name or profile path (default: $HVD_CONTAINER_SITE, config.yaml, cluster name, local).",
        rich_help_panel=_LAUNCH,
    ),
]
ImageOpt = Annotated[
    str | None,
    typer.Option(
        "--image",
        help="Image to run: a .sif/.sqfs path or a registry reference.",
        rich_help_panel=_CT,
    ),
]
RecipeOpt = Annotated[
    str | None,
    typer.Option(
        "--recipe",
        help="Recipe the image was built from (name or path): names the image, enables checks.",
        rich_help_panel=_CT,
    ),
]
NtasksOpt = Annotated[
    int | None, typer.Option("-n", "--ntasks", help="Total ranks.", rich_help_panel=_RES)
]
NodesOpt = Annotated[int | None, typer.Option("-N", "--nodes", help="Nodes.", rich_help_panel=_RES)]
PerNodeOpt = Annotated[
    int | None,
    typer.Option("--ntasks-per-node", help="Ranks per node.", rich_help_panel=_RES),
]
GpusNodeOpt = Annotated[
    int | None,
    typer.Option(
        "--gpus-per-node", help="GPUs per node (default: one per rank).", rich_help_panel=_RES
    ),
]
GpusTaskOpt = Annotated[
    int | None,
    typer.Option(
        "--gpus-per-task",
        help="Discouraged (every rank sees only GPU 0): turned into per-node GPUs.",
        rich_help_panel=_RES,
    ),
]
CpusOpt = Annotated[
    int | None, typer.Option("-c", "--cpus-per-task", help="CPUs per rank.", rich_help_panel=_RES)
]
MpiOpt = Annotated[
    str | None,
    typer.Option("--mpi", help="srun --mpi plugin (default: the site's).", rich_help_panel=_LAUNCH),
]
ControllerOpt = Annotated[
    str,
    typer.Option("--controller", help="Horovod controller: mpi or gloo.", rich_help_panel=_LAUNCH),
]
RuntimeOpt = Annotated[
    str | None,
    typer.Option(
        "--runtime",
        help="Container runtime instead of the site's: apptainer, singularity, shifter, podman-hpc, pyxis, charliecloud, none.",
        rich_help_panel=_CT,
    ),
]
ModuleOpt = Annotated[
    list[str] | None,
    typer.Option("--module", help="Extra shifter module (repeatable).", rich_help_panel=_CT),
]
BindOpt = Annotated[
    list[str] | None,
    typer.Option(
        "-B", "--bind", help="Bind mount SRC[:DST[:ro|rw]] (repeatable).", rich_help_panel=_CT
    ),
]
EnvOpt = Annotated[
    list[str] | None,
    typer.Option(
        "-e", "--env", help="Environment variable NAME=VALUE (repeatable).", rich_help_panel=_LAUNCH
    ),
]
WorkdirOpt = Annotated[
    str | None,
    typer.Option("--workdir", help="Working directory inside the container.", rich_help_panel=_CT),
]
JobNameOpt = Annotated[
    str | None, typer.Option("-J", "--job-name", help="Job name.", rich_help_panel=_SCHED)
]
TimeOpt = Annotated[
    str | None, typer.Option("-t", "--time", help="Time limit (HH:MM:SS).", rich_help_panel=_SCHED)
]
PartitionOpt = Annotated[
    str | None, typer.Option("-p", "--partition", help="Partition.", rich_help_panel=_SCHED)
]
AccountOpt = Annotated[
    str | None, typer.Option("-A", "--account", help="Account.", rich_help_panel=_SCHED)
]
QosOpt = Annotated[str | None, typer.Option("-q", "--qos", help="QOS.", rich_help_panel=_SCHED)]
ConstraintOpt = Annotated[
    str | None, typer.Option("-C", "--constraint", help="Node constraint.", rich_help_panel=_SCHED)
]
CommentOpt = Annotated[
    str | None,
    typer.Option(
        "--comment", help="Job comment (mandatory on some sites).", rich_help_panel=_SCHED
    ),
]
ScriptArg = Annotated[
    str, typer.Argument(help="Training script (.py runs with the image's python) or program.")
]
ArgsArg = Annotated[
    list[str] | None, typer.Argument(help="Arguments for the script, passed as given.")
]

# Options stop at SCRIPT: everything after it is the script's, even `--dry-run` or `-n`.
# Unknown options before it are errors: were `--ntask 8` taken as the script, a `--dry-run`
# after it would go to the script and a real job would start. A script whose name starts
# with '-' goes after `--`.
_CONTEXT = {"allow_interspersed_args": False}


def _parse_env(values: list[str] | None) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(f"--env: expected NAME=VALUE, got {item!r}")
        env[name] = value
    return env


def build_request(**options: Any) -> tuple[Site, LaunchRequest]:
    """(site, LaunchRequest) from the CLI options; recipe facts loaded only when asked for."""
    from launcher.compose import LaunchRequest
    from launcher.sites import MPI_PLUGINS, select_site

    mpi = options.get("mpi")
    if mpi is not None and mpi not in MPI_PLUGINS:
        raise UserError(f"--mpi: {mpi!r} is not allowed (allowed: {', '.join(MPI_PLUGINS)})")

    site = select_site(options.pop("site"))
    recipe = options.get("recipe")
    facts = None
    if recipe:
        from launcher.facts import facts_from_recipe

        facts = facts_from_recipe(str(recipe))
    controller = options.pop("controller")
    if controller not in ("mpi", "gloo"):
        raise UserError(f"--controller: {controller!r} is not allowed (allowed: mpi, gloo)")
    options["env"] = _parse_env(options.pop("env"))
    for key in ("binds", "modules", "args"):
        options[key] = list(options.get(key) or [])
    request = LaunchRequest(
        facts=facts,
        controller=controller,
        inside_allocation=bool(os.environ.get("SLURM_JOB_ID")),
        **options,
    )
    return site, request


def _warn(messages: list[str]) -> None:
    for message in dict.fromkeys(messages):
        typer.echo(f"hvd-container: warning: {message}", err=True)


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
    controller: ControllerOpt = "mpi",
    runtime: RuntimeOpt = None,
    module: ModuleOpt = None,
    bind: BindOpt = None,
    env: EnvOpt = None,
    workdir: WorkdirOpt = None,
    job_name: JobNameOpt = None,
    time: TimeOpt = None,
    partition: PartitionOpt = None,
    account: AccountOpt = None,
    qos: QosOpt = None,
    constraint: ConstraintOpt = None,
    comment: CommentOpt = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the command line and exit.", rich_help_panel=_LAUNCH),
    ] = False,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach", help="Outside an allocation: submit and return.", rich_help_panel=_LAUNCH
        ),
    ] = False,
    salloc: Annotated[
        bool,
        typer.Option(
            "--salloc",
            help="Outside an allocation: run interactively under salloc instead of sbatch.",
            rich_help_panel=_LAUNCH,
        ),
    ] = False,
) -> None:
    """Run SCRIPT on the site's GPUs in a container with srun.

    Inside an allocation the srun line runs here; outside one the launch is submitted as a
    batch job and followed. --dry-run prints the command line instead.
    """
    site_obj, request = build_request(
        site=site, script=script, args=args, image=image, recipe=recipe, ntasks=ntasks,
        nodes=nodes, ntasks_per_node=ntasks_per_node, gpus_per_node=gpus_per_node,
        gpus_per_task=gpus_per_task, cpus_per_task=cpus_per_task, mpi=mpi,
        controller=controller, runtime=runtime, modules=module, binds=bind, env=env,
        workdir=workdir, job_name=job_name, time=time, partition=partition, account=account,
        qos=qos, constraint=constraint, comment=comment,
    )  # fmt: skip
    if dry_run:
        from launcher.compose import plan_launch
        from launcher.prepare import prepare_launch

        # the same preparation as a real run, minus its side effects
        prepared = prepare_launch(site_obj, request, "show")
        plan = plan_launch(prepared.site, prepared.request)
        _warn([*prepared.warnings, *plan.warnings])
        typer.echo(plan.shell_line())
        return
    from launcher.slurm import execute

    code = execute(site_obj, request, detach=detach, salloc=salloc)  # composes and warns itself
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
    controller: ControllerOpt = "mpi",
    runtime: RuntimeOpt = None,
    module: ModuleOpt = None,
    bind: BindOpt = None,
    env: EnvOpt = None,
    workdir: WorkdirOpt = None,
    job_name: JobNameOpt = None,
    time: TimeOpt = None,
    partition: PartitionOpt = None,
    account: AccountOpt = None,
    qos: QosOpt = None,
    constraint: ConstraintOpt = None,
    comment: CommentOpt = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            help="Write the sbatch script here (default: stdout).",
            rich_help_panel=_LAUNCH,
        ),
    ] = None,
    submit: Annotated[
        bool,
        typer.Option(
            "--submit",
            help="Submit it with sbatch and follow the job to its end.",
            rich_help_panel=_LAUNCH,
        ),
    ] = False,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach", help="With --submit: return once submitted.", rich_help_panel=_LAUNCH
        ),
    ] = False,
) -> None:
    """Write the sbatch script that runs SCRIPT like `run` would (--submit: submit it)."""
    site_obj, request = build_request(
        site=site, script=script, args=args, image=image, recipe=recipe, ntasks=ntasks,
        nodes=nodes, ntasks_per_node=ntasks_per_node, gpus_per_node=gpus_per_node,
        gpus_per_task=gpus_per_task, cpus_per_task=cpus_per_task, mpi=mpi,
        controller=controller, runtime=runtime, modules=module, binds=bind, env=env,
        workdir=workdir, job_name=job_name, time=time, partition=partition, account=account,
        qos=qos, constraint=constraint, comment=comment,
    )  # fmt: skip
    if submit:
        from launcher.slurm import execute

        raise typer.Exit(execute(site_obj, request, detach=detach, batch=True) or 0)
    if detach:
        raise UserError("--detach goes with --submit (without it nothing is submitted)")
    from launcher.batch import render_batch_plan
    from launcher.prepare import prepare_launch

    # prepared as for a run (a local image is unpacked), so the script runs as written
    prepared = prepare_launch(site_obj, request, "write")
    text, warnings = render_batch_plan(prepared.site, prepared.request)
    _warn([*prepared.warnings, *warnings])
    if output is None:
        typer.echo(text, nl=False)
        return
    from hvd_container.atomic import write_text

    try:
        write_text(output, text, mode=0o755)
    except OSError as exc:
        raise UserError(f"-o/--output: cannot write {output}: {exc.strerror}") from None
    typer.echo(f"wrote {output}", err=True)


def register(app: typer.Typer) -> None:
    """Add `run` and `batch` to the app."""
    app.command("run", context_settings=_CONTEXT)(run)
    app.command("batch", context_settings=_CONTEXT)(batch)
