"""`hvd-container run --dry-run` without typer.

Importing typer and turning `run` into a click command takes about 55 ms, a third of the
150 ms a dry run may take. So for an argv that starts with `run` and has `--dry-run` among
its options, an argparse parser made from the same option table as the typer command
(commands/launch_options.py) reads it, and the same functions print the same line and
warnings. Whatever this parser might read differently from click (help, `--`, `-n=8`, an
unknown or malformed option, a script named like an option, shell completion) goes to the
full CLI, which also words every usage error. tests/unit/test_quick_dry_run.py checks that
both give the same output for the same argv.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from hvd_container.cli.commands.launch_options import DEFAULTS, OPTIONS, dry_run_output
from hvd_container.cli.terminal import warn

# click's shell completion is driven by this variable: completion is the full CLI's job
COMPLETION_VAR = "_HVD_CONTAINER_COMPLETE"


class _NotSure(Exception):
    """argparse met something it may read differently from click."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # instead of printing usage and exiting
        raise _NotSure(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hvd-container run", add_help=False, allow_abbrev=False)
    for dest, opt in OPTIONS.items():
        if opt.kind == "flag":
            parser.add_argument(*opt.flags, dest=dest, action="store_true")
        elif opt.kind == "list":
            parser.add_argument(*opt.flags, dest=dest, action="append")
        else:
            # counts stay text, as in the typer command: build_request reads them
            parser.add_argument(*opt.flags, dest=dest, default=DEFAULTS.get(dest))
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)  # everything after SCRIPT, as given
    return parser


def parse(argv: list[str]) -> dict[str, Any] | None:
    """The values of `run --dry-run ...` in argv, or None: the full CLI should handle argv."""
    if not argv or argv[0] != "run" or "--" in argv or COMPLETION_VAR in os.environ:
        return None
    try:
        values = vars(_parser().parse_args(argv[1:]))
    except _NotSure:
        return None
    script_at = len(argv) - 1 - len(values["args"])
    if argv[script_at] != values["script"] or values["script"].startswith("-"):
        return None  # click refuses a script named like an option unless it follows `--`
    for token in argv[1:script_at]:
        # click reads `-n=8` as -n with the value "=8"; argparse as -n 8
        if len(token) > 2 and token[0] == "-" and token[1] != "-" and token[2] == "=":
            return None
    if not all(_as_declared(OPTIONS[dest].kind, values[dest]) for dest in OPTIONS):
        return None
    return values if values["dry_run"] else None


def _as_declared(kind: str, value: Any) -> bool:
    """Whether argparse gave a value of the table's kind (`--comment=--` gives [], not '--')."""
    if kind == "flag":
        return isinstance(value, bool)
    if kind == "list":
        return value is None or all(isinstance(item, str) for item in value)
    return value is None or type(value) is str


def show(values: dict[str, Any]) -> int:
    """Print the launch line (and warnings) for parsed values, as `run --dry-run` does."""
    line, warnings = dry_run_output(values)
    warn(warnings)
    try:
        print(line, flush=True)
    except BrokenPipeError:  # the reader went away (`| head -0`): exit 1 quietly, as click does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
