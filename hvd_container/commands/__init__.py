"""Command groups of the CLI. Each module has `register(app)`; keep module-level imports light.

A module is imported, and its commands turned into click commands, only when one of them is
looked up: `run --dry-run` then pays for `run` alone (`--help` loads them all to list them).
"""

from __future__ import annotations

import importlib
from typing import Any

# command -> the module (hvd_container.commands.<module>) that registers it, in `--help` order
COMMANDS: dict[str, str] = {
    "build": "build",
    "verify": "build",
    "push": "build",
    "convert": "convert",
    "inspect": "convert",
    "recipes": "recipes",
    "render": "render",
    "sites": "sites",
    "run": "run",
    "batch": "run",
    "jobs": "jobs",
    "logs": "jobs",
    "jupyter": "jupyter",
}


def load(module_name: str) -> dict[str, Any]:
    """The click commands one module registers, by name."""
    import typer
    import typer.main

    module = importlib.import_module(f"hvd_container.commands.{module_name}")
    holder = typer.Typer()
    module.register(holder)
    return dict(typer.main.get_group(holder).commands)
