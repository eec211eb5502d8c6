"""CLI commands: `sites list`, `sites show`, `sites validate` and `sites probe` (site profiles
for srun/sbatch lines)."""

from __future__ import annotations

import typer
import yaml

from hvd_container.cli.commands.common import JsonOpt
from hvd_container.cli.completion import complete_site
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.cli.terminal import warn
from hvd_container.core.errors import UserError
from hvd_container.launcher.sites import (
    BUILTIN_DIR,
    choose_site,
    list_sites,
    load_site,
    validate_site_file,
)

sites_app = typer.Typer(
    name="sites",
    help="Site profiles: scheduler options, runtime, modules and env per cluster.",
    no_args_is_help=True,
)


@sites_app.command("list")
def list_cmd(json_output: JsonOpt = False) -> None:
    """List the available site profiles (built-in and your own) and which one is selected."""

    warnings: list[str] = []
    rows = []
    with json_errors(json_output):
        chosen, why = choose_site(None, warnings)
        for name in list_sites():
            try:
                site = load_site(name)
            except UserError as exc:
                warnings.append(f"site profile {name} passed over: {'; '.join(exc.problems)}")
                continue
            builtin = str(BUILTIN_DIR) in site.source
            origin = "built-in" if builtin else site.source
            rows.append(
                {
                    "name": name,
                    "runtime": site.runtime.kind,
                    "arch": site.arch,
                    "description": site.description,
                    "builtin": builtin,
                    "file": site.source,
                    "selected": name == chosen,
                }
            )
            if not json_output:
                mark = "*" if name == chosen else " "
                typer.echo(
                    f"{mark} {name:<12} {site.runtime.kind:<12} {site.arch:<8} {origin:<10} "
                    f"{site.description}"
                )
    if json_output:
        emit({"selected": chosen, "selected_by": why, "sites": rows, "warnings": warnings})
    else:
        typer.echo(f"(* selected by {why})")
    warn(warnings)


@sites_app.command("show")
def show_cmd(
    site: str = typer.Argument(
        None,
        help="Site name or path to a profile; default: the selected one.",
        autocompletion=complete_site,
    ),
    json_output: JsonOpt = False,
) -> None:
    """Print a site profile as validated YAML (defaults filled in)."""

    with json_errors(json_output):
        name, why = (site, "argument") if site else choose_site(None)
        profile = load_site(name)
    data = profile.model_dump(mode="json")
    source = profile.source
    first = ("name", "description", "arch", "cluster_names", "login_host", "scheduler", "mpi")
    data = {**{k: data.pop(k) for k in first}, **data}
    if json_output:
        emit(
            {
                "name": profile.name,
                "file": source,
                "selected_by": why,
                "profile": data,
                "unconfirmed": profile.unconfirmed,
            }
        )
        return
    typer.echo(f"# {source} (selected by {why})")
    for fact in profile.unconfirmed:
        typer.echo(f"# unconfirmed: {fact}")
    typer.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=None).rstrip())


@sites_app.command("validate")
def validate_cmd(
    path: str = typer.Argument(..., help="A site profile file."),
    json_output: JsonOpt = False,
) -> None:
    """Check a site profile file: every problem at once, each as FILE:LINE: key: problem
    (allowed: ...); exits 2 when there is one."""

    with json_errors(json_output):
        site = validate_site_file(path)
    partitions = len(site.scheduler.partitions)
    if json_output:
        emit({"file": path, "name": site.name, "valid": True, "unconfirmed": site.unconfirmed})
        return
    typer.echo(
        f"{path}: site {site.name} is valid ({site.runtime.kind}, {partitions} partitions, "
        f"{len(site.sources)} sources, {len(site.unconfirmed)} unconfirmed)"
    )


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.add_typer(sites_app)
