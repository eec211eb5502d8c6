"""One look for every command's --help: the names of values in capitals, no type tag on a flag,
and paragraphs that the terminal wraps (a docstring's own line breaks made ragged help)."""

from __future__ import annotations

from typing import Any


def tidy(command: Any) -> Any:
    """The click command (and its subcommands), its help and parameters tidied in place."""
    if command.help:
        command.help = unwrap(command.help)
    for param in command.params:
        if param.metavar is not None:
            continue
        if param.param_type_name == "argument":
            param.metavar = param.name.upper()  # {SCRIPT} [ARGS]..., not {script} [args]...
        elif getattr(param, "is_flag", False) and not getattr(param, "count", False):
            param.metavar = ""  # a flag takes no value: no <bool>
        elif not _is_choice(param):
            longest = max(param.opts, key=len).lstrip("-")
            param.metavar = longest.upper().replace("-", "_")
    _quiet_help_flag(command)
    for sub in getattr(command, "commands", {}).values():
        tidy(sub)
    return command


def _quiet_help_flag(command: Any) -> None:
    """--help/-h is made when help is printed: no <bool> on it either."""
    made = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = made(ctx)
        if option is not None and option.metavar is None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option


def _is_choice(param: Any) -> bool:
    """A choice shows its values (auto|rich|plain|json), which say more than a name."""
    descriptor = getattr(param, "type_descriptor", None)
    return bool(getattr(descriptor, "is_choice", False))


def unwrap(text: str) -> str:
    """Each paragraph of a docstring as one line (the terminal wraps it); a paragraph of
    indented or bulleted lines, or one that starts with click's no-wrap mark, stays as written."""
    paragraphs = [p.strip("\n") for p in text.strip().split("\n\n")]
    out = []
    for paragraph in paragraphs:
        lines = paragraph.splitlines()
        kept = paragraph.startswith("\b") or any(
            line.startswith((" ", "\t", "- ", "* ")) for line in lines[1:]
        )
        out.append(paragraph if kept else " ".join(line.strip() for line in lines))
    return "\n\n".join(out)
