"""CLI command: `render RECIPE --format docker|singularity [-o FILE]`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer


class Format(str, Enum):
    docker = "docker"
    singularity = "singularity"


def render_cmd(
    recipe: Annotated[
        str, typer.Argument(metavar="RECIPE", help="Built-in recipe name or path to a recipe file.")
    ],
    fmt: Annotated[
        Format,
        typer.Option("--format", "-f", help="docker: a Dockerfile; singularity: a definition."),
    ] = Format.docker,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write here (atomically) instead of standard output."),
    ] = None,
    context: Annotated[
        Path | None,
        typer.Option(
            "--context",
            help="Write the whole Docker build context (Dockerfile + hvd-pip) into this directory.",
        ),
    ] = None,
) -> None:
    """Render a recipe as a Dockerfile or a Singularity/Apptainer definition."""
    from hvd_container.containers.recipe import load_recipe
    from hvd_container.containers.render import render, write_context
    from hvd_container.core.atomic import write_text
    from hvd_container.core.errors import UserError

    if context is not None:
        if output is not None or fmt is not Format.docker:
            raise UserError("--context writes a Docker build context: use it without -o/--format")
        for path in write_context(load_recipe(recipe), context):
            typer.echo(f"wrote {path}", err=True)
        return
    text = render(load_recipe(recipe), fmt.value)
    if output is None:
        typer.echo(text, nl=False)
        return
    if output.is_dir():
        raise UserError(f"--output {output}: is a directory, expected a file path")
    if not output.parent.exists():
        raise UserError(f"--output {output}: directory {output.parent} does not exist")
    try:
        write_text(output, text)
    except OSError as exc:  # the temporary file is gone already: nothing half-written
        raise UserError(f"--output {output}: cannot write: {exc.strerror or exc}") from None
    typer.echo(f"wrote {output}", err=True)
    if fmt is Format.docker:
        typer.echo("note: `docker build` also needs hvd-pip next to it: see --context", err=True)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command("render")(render_cmd)
