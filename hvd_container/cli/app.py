"""The `hvd-container` command line: parses, calls a library function, prints.

Each command group lives in hvd_container/cli/commands/<group>.py and registers itself here;
a group's module is imported when one of its commands is looked up (cli/commands/__init__.py).
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer._completion_shared import Shells, get_completion_script, install
from typer.core import TyperGroup

from hvd_container.cli.commands import COMMANDS, load
from hvd_container.cli.entry import command_loaded
from hvd_container.cli.json_output import print_error, wants_json
from hvd_container.cli.terminal import Interrupted, guarded
from hvd_container.core.errors import UserError


class _Group(TyperGroup):
    """The root group: subcommands come from hvd_container.cli.commands when first looked up."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The root help lists each command's summary from the table: no command is loaded."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in COMMANDS.items()])

    def get_command(self, ctx: Any, cmd_name: str) -> Any:

        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = load(cmd_name)
            command_loaded()
        return self.commands.get(cmd_name)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Interrupted(exc) from None


app = typer.Typer(
    name="hvd-container",
    help=(
        "Build PyTorch DDP/FSDP, Horovod and Lightning training images from recipes, convert them for HPC "
        "runtimes (Apptainer/Singularity, Shifter, podman-hpc, Pyxis, Charliecloud) and "
        "launch them with the right srun/sbatch lines for your site."
    ),
    no_args_is_help=True,
    cls=_Group,
    # the root help in plain text: rich's help printer alone costs about 200 ms, more than a
    # whole dry run (a command's own --help keeps it)
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    """The version has one source, pyproject.toml, read from the installed metadata."""
    if value:
        # only for --version: importing it costs every other command about 40 ms
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("hvd-container")
        except PackageNotFoundError:  # a source tree that was never installed
            installed = "0+unknown"
        typer.echo(f"hvd-container {installed}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Root options."""


def _flatten(text: str) -> str:
    # typer >= 0.29 checks values through pydantic, which starts its messages "Value error, "
    return " ".join(text.split()).rstrip(".").removeprefix("Value error, ")


def _is(exc: BaseException, name: str) -> bool:
    """Match click's exceptions by class name: typer >= 0.28 raises those of its own click copy."""
    return any(cls.__name__ == name for cls in type(exc).__mro__)


def _param_name(param: Any) -> str:
    if getattr(param, "param_type_name", None) == "option":
        return "/".join(sorted(param.opts, key=lambda o: not o.startswith("--")))
    # typer >= 0.29's own parameter classes lack click's human_readable_name
    name = getattr(param, "human_readable_name", None) or getattr(param, "metavar", None)
    return str(name or str(getattr(param, "name", "")).upper())


def usage_error_line(exc: Exception) -> str:
    """click's message for a usage error, as one line naming the flag and what is allowed."""
    ctx = getattr(exc, "ctx", None)
    param = getattr(exc, "param", None)
    if _is(exc, "BadParameter") and not _is(exc, "MissingParameter") and param is not None:
        return f"{_param_name(param)}: {_flatten(exc.message)}"  # type: ignore[attr-defined]
    message = _flatten(exc.format_message())  # type: ignore[attr-defined]
    if ctx is None:
        return message
    if _is(exc, "NoSuchOption") and not getattr(exc, "possibilities", None):
        names = [o for p in ctx.command.get_params(ctx) for o in p.opts if o.startswith("-")]
        return f"{message} (allowed: {', '.join(names)})"
    if hasattr(ctx.command, "list_commands") and message.startswith("No such command"):
        return f"{message} (allowed: {', '.join(ctx.command.list_commands(ctx))})"
    return message


COMPLETE_VAR = "_HVD_CONTAINER_COMPLETE"


def _completion_for(argv: list[str]) -> int | None:
    """`--show-completion SHELL` / `--install-completion SHELL`: that shell's, not the one this
    runs in (typer's flags take no value where it can detect the shell, and ignored the name)."""
    if len(argv) != 2 or argv[0] not in ("--show-completion", "--install-completion"):
        return None
    shells = [s.value for s in Shells.__members__.values()]
    if argv[1] not in shells:
        typer.echo(
            f"hvd-container: error: {argv[0]}: {argv[1]!r} is not a shell this completes "
            f"(allowed: {', '.join(shells)})",
            err=True,
        )
        return 2
    if argv[0] == "--show-completion":
        typer.echo(get_completion_script(prog_name="hvd-container", complete_var=COMPLETE_VAR,
                                         shell=argv[1]))  # fmt: skip
        return 0
    shell, path = install(shell=argv[1], prog_name="hvd-container", complete_var=COMPLETE_VAR)
    typer.echo(f"{shell} completion installed in {path}; it takes effect in a new shell")
    return 0


def _run(argv: list[str] | None) -> int:
    asked = _completion_for(list(sys.argv[1:] if argv is None else argv))
    if asked is not None:
        return asked
    try:
        result = app(args=argv, prog_name="hvd-container", standalone_mode=False)
    except typer.Abort:
        typer.echo("hvd-container: aborted", err=True)
        return 1
    except SystemExit as exc:  # shell completion, EPIPE on stdout
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except Exception as exc:
        if not _is(exc, "ClickException"):
            raise
        # no_args_is_help: typer has printed the help already
        if not _is(exc, "NoArgsIsHelpError"):
            line = usage_error_line(exc)
            typer.echo(f"hvd-container: error: {line}", err=True)

            if wants_json(argv):  # a reader of the JSON lines learns of usage errors too
                error = UserError(line)
                error.exit_code = int(getattr(exc, "exit_code", 2))
                print_error(error)
        return int(getattr(exc, "exit_code", 2))
    # Without standalone mode typer returns the code of a typer.Exit (or the command's value).
    return result if isinstance(result, int) else 0


def main(argv: list[str] | None = None) -> int:
    """The full CLI: one-line errors, never a traceback for user mistakes."""
    return guarded(lambda: _run(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
