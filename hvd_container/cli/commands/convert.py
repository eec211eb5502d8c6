"""CLI commands: convert (image -> SIF / Shifter / podman-hpc / definition) and inspect (SIF)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from hvd_container.cli.commands.build import Progress, push_with_progress
from hvd_container.cli.commands.common import JsonOpt
from hvd_container.cli.completion import complete_image, complete_recipe, complete_site
from hvd_container.core.errors import UserError
from hvd_container.facts import PREFIX


class Target(str, Enum):
    sif = "sif"
    shifter = "shifter"
    podman_hpc = "podman-hpc"
    definition = "def"


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
            "--output", "-o", help="sif/def output file (default: name_tag.sif, name.def)."
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
        str | None, typer.Option(help="native SIF: refuse unless the image has this arch.")
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
    from hvd_container.cli.progress import make_reporter

    reporter = make_reporter(progress.value, json_output, starting="starting conversion")
    try:
        result = _convert(
            reporter, source, to, output, engine, compression, threads, arch, archive,
            bootstrap, site, registry, login_host,
        )  # fmt: skip
    except (UserError, KeyboardInterrupt) as exc:
        reporter.failure(exc, "convert")
        raise
    finally:
        reporter.close()
    if json_output or progress is Progress.json:
        from hvd_container.cli.json_output import emit

        emit({"to": to.value, "source": source, **result})
        return
    if result.get("note"):
        typer.echo(result["note"], err=True)
    if "reference" in result:
        typer.echo(f"ready: {result['reference']}")
    elif "seconds" in result:
        typer.echo(
            f"wrote {result['path']} ({result['size'] / 1e6:.1f} MB, {result['arch']}, "
            f"{result['compression']}, rootfs at offset {result['rootfs_offset']}) "
            f"in {result['seconds']:.1f} s"
        )
    else:
        typer.echo(f"wrote {result['path']}")


def _convert(
    reporter: Any,
    source: str,
    to: Target,
    output: Path | None,
    engine: Engine | None,
    compression: str | None,
    threads: int | None,
    arch: str | None,
    archive: Path | None,
    bootstrap: Bootstrap | None,
    site: str | None,
    registry: str | None,
    login_host: str | None,
) -> dict[str, Any]:
    """Do the conversion; the facts of what it made (json_output's `convert` record)."""
    from hvd_container.containers.convert.options import check_flags, check_recipe_arch
    from hvd_container.containers.convert.source import default_output, resolve_source

    def step(message: str) -> None:
        reporter("step", "convert", message)

    # Flags that the target/engine would ignore are refused before anything else.
    check_flags(
        to.value,
        (engine or Engine.native).value,
        {
            "--output": output,
            "--engine": engine,
            "--compression": compression,
            "--threads": threads,
            "--arch": arch,
            "--archive": archive,
            "--bootstrap": bootstrap,
            "--site": site,
            "--registry": registry,
            "--login-host": login_host,
        },
    )
    src = resolve_source(source)
    check_recipe_arch(arch, src.recipe)
    if to is Target.definition:
        from hvd_container.containers.convert.definition import debootstrap_note, write_definition

        choice = bootstrap.value if bootstrap else None
        path = write_definition(src.recipe, output, bootstrap=choice)
        note = debootstrap_note(src.recipe, choice)
        return {"path": str(path), **({"note": note} if note else {})}
    if to is Target.sif:
        target = output or default_output(src.image, ".sif")
        if engine is Engine.apptainer:
            from hvd_container.containers.convert.sif_apptainer import convert_with_apptainer

            convert_with_apptainer(src.image, target, archive=archive, on_step=step)
            return {"path": str(target), "image": src.image, "engine": "apptainer"}
        from hvd_container.containers.convert.sif_native import convert_image_to_sif

        result = convert_image_to_sif(
            src.image,
            target,
            compression=compression or "gzip",
            threads=threads,
            arch=arch,
            on_step=step,
            on_transfer=reporter.transfer,
        )
        return {
            "path": str(result.path),
            "image": result.image,
            "engine": "native",
            "size": result.size,
            "arch": result.arch,
            "compression": result.compression,
            "rootfs_offset": result.rootfs_offset,
            "seconds": round(result.seconds, 1),
        }
    from hvd_container.containers.convert.site_images import publish_to_site

    ref = publish_to_site(
        src.image,
        runtime=to.value,
        site_name=site,
        registry=registry,
        login_host=login_host,
        on_step=step,
        site_lookup=_site_target,
        push=lambda image, where: push_with_progress(image, where, reporter),
    )
    return {"image": src.image, "reference": ref}


def _site_target(name: str | None) -> Any:
    """The registry and login host of a site profile, for publishing to it."""
    from hvd_container.containers.convert.site_images import SiteTarget
    from hvd_container.launcher.sites import select_site

    site = select_site(name)
    return SiteTarget(site.name, site.images.registry, site.login_host)


def inspect(
    file: Annotated[Path, typer.Argument(help="A .sif file.", autocompletion=complete_image)],
    as_json: JsonOpt = False,
) -> None:
    """Show a SIF's descriptors, arch, labels and build facts (no Apptainer needed)."""
    from hvd_container.cli.json_output import emit, json_errors
    from hvd_container.containers.sif.reader import read_sif

    with json_errors(as_json):
        info = read_sif(file)
    if as_json:  # emit writes ASCII: control characters and surrogates are escaped
        emit(info.as_dict())
        return
    from hvd_container.cli.terminal import safe_text

    def show(line: str) -> None:
        typer.echo(safe_text(line))  # labels and names come from whoever made the file

    show(f"file:   {info.path}")
    show(f"arch:   {info.arch}")
    show(f"id:     {info.uuid}")
    show(f"rootfs: offset {info.rootfs_offset}, {info.rootfs_size} bytes")
    show("descriptors:")
    for d in info.descriptors:
        name = f"  {d.name}" if d.name else ""
        show(
            f"  {d.id:<3} group {d.group or '-':<3} {d.offset:>12}-{d.offset + d.size:<12} "
            f"{d.describe()}{name}"
        )
    facts = info.build_facts
    if facts:
        show("build facts:")
        for key, value in facts.items():
            show(f"  {key}: {value}")
    others = {k: v for k, v in info.labels.items() if not k.startswith(PREFIX)}
    if others:
        show("labels:")
        for key, value in sorted(others.items()):
            show(f"  {key}: {value}")


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command("convert")(convert)
    app.command("inspect")(inspect)
