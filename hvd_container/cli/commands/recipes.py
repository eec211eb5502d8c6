"""CLI commands: `recipes list|show|validate` (built-in and own recipe files)."""

from __future__ import annotations

from typing import Annotated

import typer

recipes_app = typer.Typer(
    name="recipes",
    help="Recipes: validated YAML descriptions of a training image.",
    no_args_is_help=True,
)


@recipes_app.command("list")
def list_cmd() -> None:
    """List the built-in recipes with their image tag and description."""
    from hvd_container.containers.recipe import list_builtin, load_recipe

    for name in list_builtin():
        recipe = load_recipe(name)
        typer.echo(f"{name:<26} {recipe.image_tag:<30} {recipe.description}")


@recipes_app.command("show")
def show_cmd(
    recipe: Annotated[
        str, typer.Argument(metavar="RECIPE", help="Built-in recipe name or path to a recipe file.")
    ],
) -> None:
    """Print a recipe as validated YAML (`extends:` merged, defaults filled in)."""
    import yaml

    from hvd_container.containers.recipe import load_recipe

    loaded = load_recipe(recipe)
    typer.echo(f"# {loaded.image_tag} digest {loaded.digest()}")
    data = loaded.model_dump(mode="json", exclude_none=True)
    typer.echo(yaml.safe_dump(data, sort_keys=False, width=1000).rstrip())


@recipes_app.command("validate")
def validate_cmd(
    recipes: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RECIPE",
            help="Recipe files or built-in names; default: every built-in recipe.",
        ),
    ] = None,
) -> None:
    """Check recipes: prints `OK name` or the one-line error for each; exit 2 on any error."""
    from hvd_container.containers.recipe import list_builtin, load_recipe
    from hvd_container.core.errors import UserError

    failed = 0
    for ref in recipes or list_builtin():
        try:
            loaded = load_recipe(ref)
        except UserError as exc:
            failed += 1
            for problem in exc.problems:
                typer.echo(f"FAIL {problem}", err=True)
        else:
            typer.echo(f"OK   {ref} ({loaded.image_tag})")
    if failed:
        raise typer.Exit(UserError.exit_code)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.add_typer(recipes_app)
