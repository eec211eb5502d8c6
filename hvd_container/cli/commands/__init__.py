"""Command groups of the CLI. Each module has `register(app)`; keep module-level imports light.

A module is imported, and its commands turned into click commands, only when one of them is
looked up: `run --dry-run` then pays for `run` alone (`--help` loads them all to list them).
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
import typer.main

# command -> the module (hvd_container.cli.commands.<module>) that registers it, in `--help` order
COMMANDS: dict[str, str] = {
    "build": "build",
    "verify": "build",
    "push": "build",
    "lock": "lock",
    "convert": "convert",
    "inspect": "inspect",
    "recipes": "recipes",
    "render": "render",
    "schema": "schema",
    "sites": "sites",
    "run": "run",
    "batch": "run",
    "doctor": "run",
    "jobs": "jobs",
    "logs": "jobs",
    "jupyter": "jupyter",
    "cache": "cache",
}


def load(name: str) -> Any:
    """The click command called name, made from the typer command its module registers."""

    module = importlib.import_module(f"hvd_container.cli.commands.{COMMANDS[name]}")
    holder = typer.Typer()
    module.register(holder)
    # typer converts every command it holds: keep only the one asked for
    holder.registered_commands = [c for c in holder.registered_commands if c.name == name]
    return typer.main.get_group(holder).commands.get(name)
