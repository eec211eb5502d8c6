"""CLI commands: `sites list`, `sites show`, `sites validate` and `sites probe` (site profiles
for srun/sbatch lines)."""

from __future__ import annotations

import typer
import yaml

from hvd_container.cli.commands.common import JsonOpt
from hvd_container.cli.completion import complete_site
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.cli.terminal import safe_text, warn
from hvd_container.core.errors import UserError
from hvd_container.launcher.sites.loader import (
    BUILTIN_DIR,
    choose_site,
    list_sites,
    load_site,
    trust_profile,
    untrust_profile,
    validate_site_file,
)
from hvd_container.launcher.sites.sources import source_lines, source_rows

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
        # one column each, as wide as its longest value; a profile of yours says so (its file:
        # `sites show NAME`, --json)
        table = [
            (r["name"], r["runtime"], r["arch"], "built-in" if r["builtin"] else "yours")
            for r in rows
        ]
        widths = [max([len(str(c[i])) for c in table] or [0]) for i in range(4)]
        for row, cells in zip(rows, table, strict=True):
            mark = "*" if row["selected"] else " "
            padded = "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True))
            typer.echo(safe_text(f"{mark} {padded}  {row['description']}"))
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
    sources: bool = typer.Option(
        False,
        "--sources",
        help="Instead: where each of the profile's facts comes from, whether it is confirmed, and how to confirm an unconfirmed one.",
    ),
    json_output: JsonOpt = False,
) -> None:
    """Print a site profile as validated YAML (defaults filled in)."""

    with json_errors(json_output):
        name, why = (site, "argument") if site else choose_site(None)
        profile = load_site(name)
    if sources and not json_output:
        typer.echo(safe_text(f"# {profile.source}: where its facts come from"))
        for line in source_lines(profile) or ["(no sources recorded)"]:
            typer.echo(safe_text(line))
        return
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
                **({"sources": source_rows(profile)} if sources else {}),
            }
        )
        return
    typer.echo(safe_text(f"# {source} (selected by {why})"))
    for fact in profile.unconfirmed:
        typer.echo(safe_text(f"# unconfirmed: {fact}"))
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


@sites_app.command("trust")
def trust_cmd(
    path: str = typer.Argument(..., help="A site profile file of yours."),
    show: bool = typer.Option(
        False, "--show", help="Only list what it sets beyond the allow-list; trust nothing."
    ),
    remove: bool = typer.Option(False, "--remove", help="Trust it no longer."),
    json_output: JsonOpt = False,
) -> None:
    """Trust a profile: it may then set what only built-in profiles may (a site's NCCL plugin
    path, a bind under /opt, a runtime flag this tool does not know). Lists exactly those
    settings; records the file's digest, so a changed file is untrusted again."""

    with json_errors(json_output):
        if show and remove:
            raise UserError("--show and --remove exclude each other")
        if remove:
            gone = untrust_profile(path)
            if json_output:
                emit({"file": path, "trusted": False, "was_trusted": gone})
            else:
                typer.echo(f"{path}: {'no longer trusted' if gone else 'was not trusted'}")
            return
        files, found = trust_profile(path, record=not show)
    if json_output:
        emit({"file": path, "trusted": not show, "files": [str(f) for f in files], "outside_allow_list": found})  # fmt: skip
        return
    verb = "would allow" if show else "trusted: it may now set"
    if not found:
        typer.echo(f"{path}: sets nothing outside the allow-list" + ("" if show else " (trusted)"))
    else:
        typer.echo(safe_text(f"{path}: {verb}, beyond what any profile may:"))
        for line in found:
            typer.echo(safe_text(f"  {line}"))
    if not show:
        shown = ", ".join(str(f) for f in files)
        typer.echo(safe_text(f"(recorded the digest of {shown}: a change untrusts it)"))


@sites_app.command("probe")
def probe_cmd(
    output: str = typer.Option(
        None,
        "-o",
        "--output",
        help="Write the probed profile here (NAME.yaml: NAME is the site's).",
    ),
    diff: str = typer.Option(
        None,
        "--diff",
        help="Compare the site with this profile (a name or a path): one line per drifted fact, exit 1 on drift.",
        autocompletion=complete_site,
    ),  # fmt: skip
    nodes: bool = typer.Option(
        False, "--nodes", help="Also run one short job: the nodes' uname -m and nvidia-smi."
    ),
    timeout: float = typer.Option(
        20.0, "--timeout", min=1.0, help="Seconds each command the probe runs may take."
    ),
) -> None:
    """Read the site from this login node (partitions, GPUs, architecture, time limits, MPI
    plugins, container runtimes, modules) without root or a job: print it as a profile, write
    it (-o), or compare it with a profile (--diff)."""

    from hvd_container.launcher.sites import probe  # the probe's code only here: ~8 ms

    if output and diff:
        raise UserError("-o and --diff exclude each other: write a new profile, or compare one")
    profile = load_site(diff) if diff else None  # a profile that does not load: said first
    if output:  # so is a file it could not write
        probe.profile_target(output)
    found = probe.probe(nodes=nodes, timeout=timeout)
    nothing = probe.nothing_read(found)
    if nothing:  # no site to describe or compare: said once, not as a profile of TODOs
        raise UserError(nothing)
    for line in found.unread:
        warn([f"probe: could not read {line}"])
    if profile is not None:
        drifted = probe.drift(profile, found)
        for line in drifted:
            typer.echo(safe_text(line))  # what the site's tools printed
        if drifted:
            raise typer.Exit(1)
        typer.echo(f"site {profile.name}: no drift ({profile.source})")
        return
    if output:
        site = probe.write_profile(found, output)
        typer.echo(
            f"wrote {output}: site {site.name}, {len(site.scheduler.partitions)} partitions, "
            f"runtime {site.runtime.kind} (check the TODO lines)"
        )
        return
    typer.echo(probe.checked_profile_text(found, "probed")[0], nl=False)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.add_typer(sites_app)
