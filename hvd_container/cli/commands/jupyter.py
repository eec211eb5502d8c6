"""CLI command: `jupyter` (JupyterLab in the image on a compute node, with its ssh tunnel line)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from hvd_container.cli.commands.common import JsonOpt
from hvd_container.cli.commands.launch_options import LaunchCommand, launch_parameters
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.cli.terminal import TerminalReporter
from hvd_container.launcher.plan.request import LaunchOptions
from hvd_container.launcher.run import commands
from hvd_container.launcher.run import jupyter as jupyter_job

JUPYTER_PARAMETERS = (
    "site", "image", "recipe", "gpus_per_node", "runtime", "binds", "env", "time", "partition",
    "account", "qos", "constraint", "comment",
)  # fmt: skip


@launch_parameters(*JUPYTER_PARAMETERS)
def jupyter(
    stop: Annotated[
        str | None, typer.Option("--stop", help="Cancel the Jupyter job JOBID and exit.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the server to start.")
    ] = 300.0,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the batch script the job would be and exit."),
    ] = False,
    json_output: JsonOpt = False,
    **options: Any,
) -> None:
    """Start JupyterLab inside the image on a compute node; print the ssh tunnel and the URL.

    The port and the token are random (never your user name). The server keeps running
    after this command returns; stop it with `hvd-container jupyter --stop JOBID`.
    """
    with json_errors(json_output):
        if stop is not None:
            jupyter_job.stop(stop)
        elif dry_run:
            planned = commands.jupyter_dry_run(TerminalReporter(), LaunchOptions(**options))
        else:
            session = commands.jupyter(
                TerminalReporter(), LaunchOptions(**options), timeout=timeout
            )
    if dry_run and stop is None:
        assert planned.script is not None
        if json_output:
            emit(
                {"site": planned.site.name, "script": planned.script, "warnings": planned.warnings}
            )
        else:
            typer.echo(planned.script, nl=False)
        return
    if stop is not None:
        if json_output:
            emit({"job_id": stop, "cancelled": True})
        else:
            typer.echo(f"job {stop} cancelled")
        return
    if json_output:
        emit(
            {
                "job_id": session.job_id,
                "node": session.node,
                "port": session.port,
                "ssh": session.ssh_line,
                "url": session.local_url,
                "cluster_url": session.cluster_url,
            }
        )
        return
    typer.echo(f"Jupyter job {session.job_id} on {session.node}, port {session.port}")
    typer.echo("1. open the tunnel on your computer:")
    typer.echo(f"   {session.ssh_line}")
    typer.echo("2. then browse to:")
    typer.echo(f"   {session.local_url}")
    typer.echo(f"   (from inside the cluster: {session.cluster_url})")
    typer.echo(f"stop it with: hvd-container jupyter --stop {session.job_id}")


def register(app: typer.Typer) -> None:
    """Add `jupyter` to the app."""
    app.command("jupyter", cls=LaunchCommand)(jupyter)
