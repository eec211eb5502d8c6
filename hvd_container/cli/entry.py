"""The `hvd-container` program: cli/app.py's CLI, loaded with the garbage collector held.

Loading typer, pydantic and a command makes some 60,000 objects the collector tracks, which
live as long as the process (modules, classes, their validators). While they are made, the
collector walks them again and again, and once more when the interpreter exits: about 25 ms
of a 190 ms dry run (bench/dryrun.py, side by side). So collection waits until the command is loaded; what exists then is
frozen (gc.freeze: left out of every later collection) and collection resumes for what the
command itself makes. Code that calls cli.app.main directly (the tests) keeps its collector.
"""

from __future__ import annotations

import gc

_held = False


def main(argv: list[str] | None = None) -> int:
    """The whole program, as the console script and `python -m hvd_container` run it."""
    global _held
    _held = gc.isenabled()
    gc.disable()
    try:
        # the CLI's own imports, about 90 ms, made while the collector is held
        from hvd_container.cli.app import main as cli

        return cli(argv)
    finally:
        command_loaded()


def command_loaded() -> None:
    """The command's modules are loaded: freeze what exists, let the collector run again."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
