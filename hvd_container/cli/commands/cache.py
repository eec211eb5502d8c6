"""CLI commands: `cache list` and `cache prune` (the images unpacked for ch-run)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from hvd_container.cli.commands.common import JsonOpt
from hvd_container.cli.completion import complete_image, complete_site
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.launcher.runtimes import charliecloud
from hvd_container.launcher.runtimes.charliecloud import cache_dir, entries, prune
from hvd_container.launcher.sites.loader import select_site

SiteOpt = Annotated[
    str | None,
    typer.Option(
        "--site",
        help="The site whose images.cache_dir to use (default: the selected site).",
        autocompletion=complete_site,
    ),
]


def _site_dir(site: str | None) -> str | None:

    return select_site(site).images.cache_dir


cache_app = typer.Typer(
    name="cache",
    help="Images unpacked for Charliecloud's ch-run: list them, prune them.\n\n"
    "They are kept in $HVD_CONTAINER_CACHE, else $XDG_CACHE_HOME/hvd-container.",
    no_args_is_help=True,
)


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


@cache_app.command("list")
def list_cmd(site: SiteOpt = None, json_output: JsonOpt = False) -> None:
    """List the unpacked images: key (from the SIF's digest), size, when it was unpacked."""

    with json_errors(json_output):
        site_dir = _site_dir(site)
        found = entries(site_dir)
    rows = [
        {
            "key": e.key,
            "path": str(e.path),
            "bytes": e.size,
            "modified": round(e.modified, 3),
            "partial": e.partial,
            "source": e.source,
            "stale": e.stale,
        }
        for e in found
    ]
    if json_output:
        emit({"dir": str(cache_dir(site_dir)), "images": rows, "bytes": sum(e.size for e in found)})
        return
    for e in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.modified))
        state = "  (unfinished unpack)" if e.partial else ""
        if e.source:
            state += f"  from {e.source}" + (
                "  (stale: the SIF is gone or changed)" if e.stale else ""
            )
        typer.echo(f"{e.key}  {_size(e.size):>10}  {when}{state}")
    total = _size(sum(e.size for e in found))
    typer.echo(f"{len(found)} images, {total} in {cache_dir(site_dir)}")


KeepOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--keep",
        metavar="SIF",
        help="Keep the unpacked copy of this SIF (repeatable); the rest goes.",
        autocompletion=complete_image,
    ),
]


StaleOpt = Annotated[
    bool,
    typer.Option(
        "--stale",
        help="Remove only the copies whose SIF is gone or was replaced (converted again).",
    ),
]


@cache_app.command("prune")
def prune_cmd(
    keep: KeepOpt = None,
    stale: StaleOpt = False,
    site: SiteOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Remove unpacked images (all, all but --keep ones, or the --stale ones) and unpacks that
    never finished."""

    with json_errors(json_output):
        site_dir = _site_dir(site)
        keys = {charliecloud.key_of(image) for image in keep or []}
        pruned = prune(keys, site_dir, stale_only=stale)
    if json_output:
        emit(
            {
                "removed": [str(p) for p in pruned.removed],
                "kept": sorted(keys),
                "not_ours": pruned.not_ours,
            }
        )
        return
    for path in pruned.removed:
        typer.echo(f"removed {path}")
    typer.echo(f"{len(pruned.removed)} removed")
    if pruned.not_ours:
        typer.echo(
            f"left {pruned.not_ours} other names in {cache_dir(site_dir)}: hvd-container did "
            "not make them (it removes only what it recorded as its own)"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(cache_app)
