"""CLI command: convert (recipe or image -> SIF / Shifter / podman-hpc / definition)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from hvd_container.cli.commands.build import Progress, push_with_progress
from hvd_container.cli.completion import complete_recipe, complete_site
from hvd_container.cli.json_output import emit
from hvd_container.cli.progress import make_reporter, reported
from hvd_container.containers.convert.site_images import SiteTarget
from hvd_container.containers.convert.targets import TARGETS, ConvertRequest
from hvd_container.containers.convert.targets import convert as run_convert
from hvd_container.launcher.sites.loader import select_site

# --to's values: containers/convert/targets.py lists them (a site runtime's come from its module)
Target = Enum("Target", {name.replace("-", "_"): name for name in TARGETS}, type=str)  # type: ignore[misc]


class Engine(str, Enum):
    native = "native"
    apptainer = "apptainer"


class Bootstrap(str, Enum):
    debootstrap = "debootstrap"
    docker = "docker"


def convert(
    source: Annotated[
        str,
        typer.Argument(
            help="Recipe (file or built-in name) or Docker image.", autocompletion=complete_recipe
        ),
    ],
    to: Annotated[Target, typer.Option("--to", help="What to produce.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="sif/def output file (default: name_tag.sif, name.def); a folder for the SIF "
            "files of a recipe that makes an image for each of several architectures.",
        ),
    ] = None,
    engine: Annotated[
        Engine | None,
        typer.Option(help="SIF: native (Docker + tar2sqfs, default) or apptainer (on PATH)."),
    ] = None,
    compression: Annotated[
        str | None, typer.Option(help="native SIF: gzip (default), zstd or xz.")
    ] = None,
    threads: Annotated[
        int | None, typer.Option(min=1, help="native SIF: compressor jobs (default: all cores).")
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option(
            help="native SIF: refuse unless the image has this arch; of a recipe's images, "
            "the one for this arch (NAME:VERSION-ARCH)."
        ),
    ] = None,
    archive: Annotated[
        Path | None, typer.Option(help="apptainer engine: a `docker save` tar, not the daemon.")
    ] = None,
    bootstrap: Annotated[
        Bootstrap | None,
        typer.Option(
            help="def: for debootstrap-based recipes, `docker` starts from debian:<suite> "
            "(for build hosts without debootstrap)."
        ),
    ] = None,
    site: Annotated[
        str | None,
        typer.Option(help="shifter/podman-hpc: site profile.", autocompletion=complete_site),
    ] = None,
    registry: Annotated[
        str | None, typer.Option(help="shifter/podman-hpc: push here (default: site's registry).")
    ] = None,
    login_host: Annotated[
        str | None, typer.Option(help="shifter/podman-hpc: run the site tool there over ssh.")
    ] = None,
    progress: Annotated[
        Progress,
        typer.Option(
            "--progress", help="auto: a rich display on a terminal, plain lines otherwise."
        ),
    ] = Progress.auto,
    json_output: Annotated[
        bool,
        typer.Option("--json", help="JSON lines: progress events, then one result record."),
    ] = False,
) -> None:
    """Turn a built image into what a site runs."""

    reporter = make_reporter(progress.value, json_output, starting="starting conversion")
    request = ConvertRequest(
        source=source,
        to=to.value,  # type: ignore[arg-type]  # the enum's values are the targets
        output=output,
        engine=engine.value if engine else None,  # type: ignore[arg-type]
        compression=compression,
        threads=threads,
        arch=arch,
        archive=archive,
        bootstrap=bootstrap.value if bootstrap else None,  # type: ignore[arg-type]
        site=site,
        registry=registry,
        login_host=login_host,
    )
    with reported(reporter, "convert"):
        result = run_convert(
            request,
            on_step=lambda message: reporter("step", "convert", message),
            on_transfer=reporter.transfer,
            push=lambda image, where: push_with_progress(image, where, reporter),
            site_lookup=_site_target,
        )
    if json_output or progress is Progress.json:
        emit({"to": to.value, "source": source, **result})
        return
    for made in result.get("images", [result]):
        _say(made)


def _say(result: dict[str, Any]) -> None:
    if result.get("note"):
        typer.echo(result["note"], err=True)
    if "reference" in result:
        typer.echo(f"ready: {result['reference']}")
    elif result.get("kept"):
        typer.echo(
            f"kept {result['path']}: already the SIF of {result['image']} ({result['arch']}, "
            f"{result['compression']}); remove it to convert again"
        )
    elif "seconds" in result:
        typer.echo(
            f"wrote {result['path']} ({result['size'] / 1e6:.1f} MB, {result['arch']}, "
            f"{result['compression']}, rootfs at offset {result['rootfs_offset']}) "
            f"in {result['seconds']:.1f} s"
        )
    else:
        typer.echo(f"wrote {result['path']}")


def _site_target(name: str | None) -> Any:
    """The registry and login host of a site profile, for publishing to it."""

    site = select_site(name)
    return SiteTarget(site.name, site.images.registry, site.login_host)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command("convert")(convert)
