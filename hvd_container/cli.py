"""The `hvd-container` command line: parses, calls a library function, prints.

Each command group lives in hvd_container/commands/<group>.py and registers itself here.
Command modules import heavy libraries (docker, requests, spython, pydantic models of the
build side) inside their functions so that `run --dry-run` stays fast.
"""

from __future__ import annotations

import sys

import typer

from hvd_container import __version__
from hvd_container.errors import UserError

app = typer.Typer(
    name="hvd-container",
    help=(
        "Build Horovod/Lightning training images from recipes, convert them for HPC "
        "runtimes (Apptainer/Singularity, Shifter, podman-hpc, Pyxis, Charliecloud) and "
        "launch them with the right srun/sbatch lines for your site."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hvd-container {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Root options."""


def _register() -> None:
    from hvd_container.commands import COMMAND_MODULES

    for module in COMMAND_MODULES:
        module.register(app)


_register()


def _caused_by_interrupt(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one-line errors, never a traceback for user mistakes."""
    try:
        app(args=argv, prog_name="hvd-container", standalone_mode=True)
    except SystemExit as exc:
        if _caused_by_interrupt(exc):
            # typer turns Ctrl-C into a silent exit 130; say what happened.
            typer.echo("hvd-container: interrupted", err=True)
            return 130
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except UserError as exc:
        typer.echo(f"hvd-container: error: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        typer.echo("hvd-container: interrupted", err=True)
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
