"""CLI commands: `sites list` and `sites show` (site profiles for srun/sbatch lines)."""

from __future__ import annotations

import typer

sites_app = typer.Typer(
    name="sites",
    help="Site profiles: scheduler options, runtime, modules and env per cluster.",
    no_args_is_help=True,
)


@sites_app.command("list")
def list_cmd() -> None:
    """List the available site profiles (built-in and your own) and which one is selected."""
    from hvd_container.cli.terminal import warn
    from hvd_container.core.errors import UserError
    from hvd_container.launcher.sites import BUILTIN_DIR, choose_site, list_sites, load_site

    warnings: list[str] = []
    chosen, why = choose_site(None, warnings)
    for name in list_sites():
        try:
            site = load_site(name)
        except UserError as exc:
            warnings.append(f"site profile {name} passed over: {'; '.join(exc.problems)}")
            continue
        origin = "built-in" if str(BUILTIN_DIR) in site.source else site.source
        mark = "*" if name == chosen else " "
        typer.echo(
            f"{mark} {name:<12} {site.runtime.kind:<12} {site.arch:<8} {origin:<10} {site.description}"
        )
    typer.echo(f"(* selected by {why})")
    warn(warnings)


@sites_app.command("show")
def show_cmd(
    site: str = typer.Argument(
        None, help="Site name or path to a profile; default: the selected one."
    ),
) -> None:
    """Print a site profile as validated YAML (defaults filled in)."""
    import dataclasses

    import yaml

    from hvd_container.launcher.sites import choose_site, load_site

    name, why = (site, "argument") if site else choose_site(None)
    profile = load_site(name)
    data = dataclasses.asdict(profile)
    source = data.pop("source")
    first = ("name", "description", "arch", "cluster_names", "login_host", "scheduler", "mpi")
    data = {**{k: data.pop(k) for k in first}, **data}
    typer.echo(f"# {source} (selected by {why})")
    typer.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=None).rstrip())


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.add_typer(sites_app)
