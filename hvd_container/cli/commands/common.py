"""Arguments and options several commands share, spelled once."""

from __future__ import annotations

from typing import Annotated

import typer

from hvd_container.cli.completion import complete_recipe

RecipeArg = Annotated[
    str,
    typer.Argument(
        metavar="RECIPE",
        help="Built-in recipe name or path to a recipe file.",
        autocompletion=complete_recipe,
    ),
]
# one result record (cli/json_output.py); streaming commands (build, push) say JSON lines
JsonOpt = Annotated[
    bool, typer.Option("--json", help="One JSON object on stdout (fields: `schema output`).")
]
ArchOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--arch",
        metavar="ARCH",
        help="An image for ARCH (amd64, arm64, ppc64le; repeat for several: each tagged "
        "VERSION-ARCH with its own lock NAME.ARCH.lock) instead of the recipe's `arch:`.",
    ),
]
