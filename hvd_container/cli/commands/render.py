"""CLI command: `render RECIPE --format docker|singularity [-o FILE]`, and a user's own
Dockerfile as a definition: `render --from-dockerfile FILE --format singularity`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from hvd_container.cli.completion import complete_recipe
from hvd_container.containers.context import write_context
from hvd_container.containers.convert.from_dockerfile import dockerfile_to_definition
from hvd_container.containers.recipe_loader import load_recipe
from hvd_container.containers.render import dockerfile_needs, render
from hvd_container.core.atomic import write_output
from hvd_container.core.errors import UserError
from hvd_container.core.files import read_limited_text

# A Dockerfile is text people write; a bigger file is not one (and would only fill memory).
MAX_DOCKERFILE_BYTES = 1024 * 1024


class Format(str, Enum):
    docker = "docker"
    singularity = "singularity"


def render_cmd(
    recipe: Annotated[
        str | None,
        typer.Argument(
            metavar="RECIPE",
            help="Built-in recipe name or path to a recipe file.",
            autocompletion=complete_recipe,
        ),
    ] = None,
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
    from_dockerfile: Annotated[
        Path | None,
        typer.Option(
            "--from-dockerfile",
            help="Convert your own Dockerfile (one stage) instead of a recipe; needs --format singularity.",
        ),
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch",
            help="The image for this architecture (of a recipe that names several, or another "
            "than its own: NAME:VERSION-ARCH).",
        ),
    ] = None,
) -> None:
    """Render a recipe as a Dockerfile or a Singularity/Apptainer definition."""

    if from_dockerfile is not None:
        if recipe is not None or context is not None or fmt is not Format.singularity:
            raise UserError(
                "--from-dockerfile: converts a Dockerfile to a definition: give it with "
                "--format singularity, without RECIPE or --context"
            )
        text = _dockerfile_definition(from_dockerfile)
    elif recipe is None:
        raise UserError(
            "RECIPE: missing (a built-in recipe name or a recipe file), or --from-dockerfile FILE"
        )
    else:
        if context is not None and (output is not None or fmt is not Format.docker):
            raise UserError("--context writes a Docker build context: use it without -o/--format")
        rendered = _recipe_text(recipe, fmt, context, arch)
        if rendered is None:
            return
        text = rendered
    if output is None:
        typer.echo(text, nl=False)
        return
    write_output(output, "--output", text)
    typer.echo(f"wrote {output}", err=True)
    if fmt is Format.docker and recipe is not None:
        needs = dockerfile_needs(load_recipe(recipe, arch))
        if needs:
            typer.echo(f"note: {needs}", err=True)


def _dockerfile_definition(path: Path) -> str:
    try:
        text = read_limited_text(path, "a Dockerfile", MAX_DOCKERFILE_BYTES, "a Dockerfile")
    except UserError as exc:  # the message starts with the path: name the option too
        raise UserError(f"--from-dockerfile {exc}") from None
    return dockerfile_to_definition(text)


def _recipe_text(recipe: str, fmt: Format, context: Path | None, arch: str | None) -> str | None:
    """The recipe rendered in fmt; None when --context wrote a build context instead."""

    if context is not None:
        for path in write_context(load_recipe(recipe, arch), context):
            typer.echo(f"wrote {path}", err=True)
        return None
    return render(load_recipe(recipe, arch), fmt.value)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command("render")(render_cmd)
