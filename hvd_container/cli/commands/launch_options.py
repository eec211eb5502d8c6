"""The launch parameters of run, batch, doctor and jupyter, spelled once.

launcher/plan/request.py's OPTIONS lists them (flags, kind of value, help); `launch_parameters`
gives a command the typer options of those it takes, and the command hands their values on
to the library as keyword arguments.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperCommand

from hvd_container.cli.completion import (
    complete_controller,
    complete_image,
    complete_mpi,
    complete_partition,
    complete_recipe,
    complete_runtime,
    complete_site,
)
from hvd_container.core.errors import UserError
from hvd_container.launcher.plan.request import OPTIONS, help_shown, option_help

F = TypeVar("F", bound=Callable[..., Any])

SCRIPT_HELP = "Training script (.py runs with the image's python) or program."
ARGS_HELP = "Arguments for the script, passed as given; one of this command's own long options among them needs a `--` before it (which is dropped)."
ScriptArg = Annotated[str, typer.Argument(help=SCRIPT_HELP)]
ArgsArg = Annotated[list[str] | None, typer.Argument(help=ARGS_HELP)]

# Options stop at SCRIPT: what follows is the script's (script_arguments checks it). Unknown
# options before it are errors: were `--ntask 8` taken as the script, a `--dry-run` after it
# would go to the script and a real job would start. A script whose name starts with '-'
# goes after `--`.
CONTEXT = {"allow_interspersed_args": False}


def script_arguments(ctx: typer.Context, script: str, args: list[str] | None) -> list[str]:
    """SCRIPT's arguments as it gets them. One of the command's own long options among them
    (`train.py --dry-run`: the script would get it and a real job start) is refused with the
    fix, unless a `--` before it says that the rest is the script's; that `--` is dropped.
    Short options are the script's (`-n`, `-e`, `-o` are common script flags). A script whose
    name starts with '-' came after a `--` already: its arguments are all its own."""
    given = list(args or [])
    if script.startswith("-"):
        return given
    cut = given.index("--") if "--" in given else len(given)
    own = {
        flag
        for param in ctx.command.params
        if param.param_type_name == "option"
        for flag in (*param.opts, *param.secondary_opts)
        if flag.startswith("--")
    }
    for arg in given[:cut]:
        name = arg.split("=", 1)[0]
        if name in own:
            raise UserError(
                f"{name} after the script {script} would go to the script, not to "
                f"`hvd-container {ctx.command.name}`: put it before {script}, or write "
                f"`{script} -- {arg}` to pass it on to the script"
            )
    return given[:cut] + given[cut + 1 :]


class LaunchCommand(TyperCommand):
    """A command with launch parameters: its help lists what is registered when it is shown
    (--runtime's kinds: listing them loads every runtime's module, about 7 ms that a launch,
    which loads its own runtime's, does not pay)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        for param in self.params:
            help_text = getattr(param, "help", None)
            if help_text:
                param.help = help_shown(help_text)  # type: ignore[attr-defined]
        super().format_help(ctx, formatter)


# values only hvd-container knows how to complete
_COMPLETERS = {
    "site": complete_site, "recipe": complete_recipe, "image": complete_image,
    "partition": complete_partition, "controller": complete_controller,
    "runtime": complete_runtime, "mpi": complete_mpi,
}  # fmt: skip
# counts arrive as text: the library reads them as Slurm does (decimal digits only)
_TYPES: dict[str, Any] = {
    "str": str | None,
    "int": str | None,
    "list": list[str] | None,
    "flag": bool | None,
}

EVERY = tuple(OPTIONS)


# one per name: run, batch and doctor take the same (typer copies what it changes of one)
@functools.cache
def _parameter(name: str) -> inspect.Parameter:
    option = OPTIONS[name]
    extra: dict[str, Any] = {}
    if name in _COMPLETERS:
        extra["autocompletion"] = _COMPLETERS[name]
    info = typer.Option(
        *option.flags, help=option_help(name), rich_help_panel=option.panel, **extra
    )
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[_TYPES[option.type], info],
    )


def launch_parameters(*names: str) -> Callable[[F], F]:
    """Give a command (whose own parameters end in `**options`) the launch parameters
    `names`: typer reads them from its signature, the values arrive in `options`."""

    def decorate(command: F) -> F:
        # typer calls the command with keywords only: every parameter can be one
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(command, eval_str=True).parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        added = [_parameter(n) for n in names]
        command.__signature__ = inspect.Signature([*own, *added])  # type: ignore[attr-defined]
        return command

    return decorate
