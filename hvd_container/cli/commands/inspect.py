"""CLI command: inspect (a SIF's descriptors, arch, labels and build facts)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hvd_container.cli.commands.common import JsonOpt
from hvd_container.cli.completion import complete_image
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.cli.terminal import safe_text
from hvd_container.containers.sif.reader import read_sif
from hvd_container.facts import PREFIX


def inspect(
    file: Annotated[Path, typer.Argument(help="A .sif file.", autocompletion=complete_image)],
    as_json: JsonOpt = False,
) -> None:
    """Show a SIF's descriptors, arch, labels and build facts (no Apptainer needed)."""
    with json_errors(as_json):
        info = read_sif(file)
    if as_json:  # emit writes ASCII: control characters and surrogates are escaped
        emit(info.as_dict())
        return

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
    """Add `inspect` to the app."""
    app.command("inspect")(inspect)
