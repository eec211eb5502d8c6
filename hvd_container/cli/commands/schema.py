"""CLI command: `schema recipe|site|output [-o FILE]` (JSON Schemas for editors, check-jsonschema
and readers of --json)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from hvd_container.cli.json_output import output_schema
from hvd_container.containers.recipe_schema import recipe_schema
from hvd_container.core.atomic import write_output
from hvd_container.launcher.sites.model import site_schema


class Kind(str, Enum):
    recipe = "recipe"
    site = "site"
    output = "output"


def schema_text(kind: str) -> str:
    """The schema of a recipe or a site profile file as JSON text (what the shipped copies hold)."""

    made: dict[str, Any]
    if kind == "recipe":
        made = recipe_schema()
    elif kind == "output":
        made = output_schema()
    else:
        made = site_schema()
    return json.dumps(made, indent=2, ensure_ascii=False) + "\n"


def schema_cmd(
    kind: Annotated[
        Kind,
        typer.Argument(
            metavar="recipe|site|output",
            help="A recipe or site profile file, or the records --json prints.",
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write here (atomically) instead of standard output."),
    ] = None,
) -> None:
    """Print the JSON Schema of a recipe, a site profile or `--json` records.

    For an editor, put `# yaml-language-server: $schema=FILE` on the first line of your YAML
    file."""
    text = schema_text(kind.value)
    if output is None:
        typer.echo(text, nl=False)
        return

    write_output(output, "--output", text)
    typer.echo(f"wrote {output}", err=True)


def register(app: typer.Typer) -> None:
    """Add `schema` to the app."""
    app.command("schema")(schema_cmd)
