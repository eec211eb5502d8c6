"""Command groups of the CLI. Each module has `register(app)`; keep module-level imports light.

A module is imported, and its commands turned into click commands, only when one of them is
looked up: `run --dry-run` then pays for `run` alone (`--help` loads them all to list them).
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
import typer.main

from hvd_container.cli.help_text import tidy

# command -> (the module hvd_container.cli.commands.<module> that registers it, its one-line
# summary for the root `--help`), in `--help` order. The summaries let the root help list the
# commands without importing one (tests/unit/cli/test_app.py holds them to the commands' own).
COMMANDS: dict[str, tuple[str, str]] = {
    "build": (
        "build",
        "Build the recipe's image through a container engine, verify it, label it (and push it).",
    ),
    "verify": (
        "build",
        "Re-run the checks on an image (check-build, hvd.init per framework, recipe checks).",
    ),
    "push": (
        "build",
        "Push a built image to a registry and read its digest back from the registry.",
    ),
    "lock": ("lock", "Resolve the recipe's Python packages with hashes and write NAME.lock."),
    "convert": ("convert", "Turn a built image into what a site runs."),
    "inspect": (
        "inspect",
        "Show a SIF's facts, or the bill of materials of a SIF or an image and what changed.",
    ),
    "sign": ("sign", "Sign a SIF with your OpenPGP key, or a pushed image with your key file."),
    "recipes": ("recipes", "Recipes: validated YAML descriptions of a training image."),
    "render": ("render", "Render a recipe as a Dockerfile or a Singularity/Apptainer definition."),
    "schema": ("schema", "Print the JSON Schema of a recipe, a site profile or `--json` records."),
    "sites": ("sites", "Site profiles: scheduler options, runtime, modules and env per cluster."),
    "run": ("run", "Run SCRIPT on the site's GPUs in a container with srun."),
    "batch": (
        "run",
        "Write the sbatch script that runs SCRIPT like `run` would (--submit: submit it).",
    ),
    "doctor": (
        "run",
        "Check that IMAGE will start and communicate on SITE before a job waits in the queue.",
    ),
    "jobs": ("jobs", "List your Slurm jobs, recently finished ones included."),
    "logs": ("jobs", "Print a job's output: its stdout file, then its stderr file."),
    "jupyter": (
        "jupyter",
        "Start JupyterLab inside the image on a compute node; print the ssh tunnel and the URL.",
    ),
    "cache": ("cache", "Images unpacked for Charliecloud's ch-run: list them, prune them."),
}


def load(name: str) -> Any:
    """The click command called name, made from the typer command its module registers."""

    module = importlib.import_module(f"hvd_container.cli.commands.{COMMANDS[name][0]}")
    holder = typer.Typer()
    module.register(holder)
    # typer converts every command it holds: keep only the one asked for
    holder.registered_commands = [c for c in holder.registered_commands if c.name == name]
    command = typer.main.get_group(holder).commands.get(name)
    return tidy(command) if command is not None else None
