"""CLI commands: `recipes list|show|validate` (built-in and own recipe files)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
import yaml

from hvd_container.cli.commands.common import JsonOpt, RecipeArg
from hvd_container.cli.completion import complete_recipe
from hvd_container.cli.json_output import emit, error_record, json_errors, write_line
from hvd_container.cli.terminal import safe_text
from hvd_container.containers import recipe_loader
from hvd_container.containers.recipe import MultiArch
from hvd_container.containers.recipe_loader import (
    builtin_path,
    load_recipe_to_read,
    recipe_file,
)
from hvd_container.core.errors import Problems, UserError, problem_record

recipes_app = typer.Typer(
    name="recipes",
    help="Recipes: validated YAML descriptions of a training image.",
    no_args_is_help=True,
)


@recipes_app.command("list")
def list_cmd(json_output: JsonOpt = False) -> None:
    """List the built-in recipes with their image tag and description."""

    with json_errors(json_output):
        rows = []
        for name in recipe_loader.list_builtin():
            images = recipe_loader.load_images(name)
            if isinstance(images, MultiArch):  # the index's tag; the first image's facts
                recipe, tag, arch = images.images[0], images.index_tag, ",".join(images.arches)
            else:
                recipe, tag, arch = images, images.image_tag, images.arch
            if not json_output:
                typer.echo(safe_text(f"{name:<26} {tag:<30} {recipe.description}"))
            rows.append(
                {
                    "name": name,
                    "image": tag,
                    "description": recipe.description,
                    "arch": arch,
                    "gpu": recipe.gpu,
                    "frameworks": recipe.frameworks,
                    "file": str(builtin_path(name)),
                }
            )
    if json_output:
        emit({"recipes": rows})


@recipes_app.command("show")
def show_cmd(
    recipe: RecipeArg,
    json_output: JsonOpt = False,
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch", help="Of a recipe that names several architectures: that one's image."
        ),
    ] = None,
) -> None:
    """Print a recipe as validated YAML (`extends:` merged, defaults filled in)."""

    with json_errors(json_output):
        loaded, notes = load_recipe_to_read(recipe, arch)
        data = loaded.model_dump(mode="json", exclude_none=True)
        if json_output:
            emit(
                {
                    "name": loaded.name,
                    "image": loaded.image_tag,
                    "digest": loaded.digest(),
                    "file": str(recipe_file(recipe)),
                    "recipe": data,
                    **({"notes": notes} if notes else {}),
                }
            )
            return
    typer.echo(f"# {loaded.image_tag} digest {loaded.digest()}")
    for note in notes:
        typer.echo(safe_text(f"# note: {note}"))
    typer.echo(yaml.safe_dump(data, sort_keys=False, width=1000).rstrip())


@recipes_app.command("validate")
def validate_cmd(
    recipes: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RECIPE",
            help="Recipe files or built-in names; default: every built-in recipe.",
            autocompletion=complete_recipe,
        ),
    ] = None,
    json_output: JsonOpt = False,
) -> None:
    """Check recipes: prints `OK name` or every error of each, one a line; exit 2 on any error."""

    rows: list[dict[str, Any]] = []
    for ref in recipes or recipe_loader.list_builtin():
        try:
            images, notes = recipe_loader.images_to_read(ref)
            tags = ", ".join(image.image_tag for image in images)
        except UserError as exc:
            problems = exc.problems
            details = [problem_record(p) for p in problems]
            rows.append(
                {"recipe": ref, "ok": False, "image": None, "problems": problems,
                 "details": details}
            )  # fmt: skip
            for problem in exc.problems:
                typer.echo(safe_text(f"FAIL {problem}"), err=True)
        else:
            row = {"recipe": ref, "ok": True, "image": tags, "problems": [],
                   "details": []}  # fmt: skip
            rows.append({**row, **({"notes": notes} if notes else {})})
            if not json_output:
                typer.echo(safe_text(f"OK   {ref} ({tags})"))
                for note in notes:
                    typer.echo(safe_text(f"NOTE {note}"))
    failed = [row for row in rows if not row["ok"]]
    if json_output and not failed:
        emit({"ok": True, "recipes": rows})
    if failed:
        problems = [p for row in failed for p in row["problems"]]
        error = Problems(problems) if len(problems) > 1 else UserError(problems[0])
        if json_output:  # the one shape of a failure, with every recipe's row
            write_line(json.dumps({**error_record(error, "validate"), "recipes": rows}))
        raise typer.Exit(UserError.exit_code)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.add_typer(recipes_app)
