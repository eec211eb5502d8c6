"""The sbatch script of a launch: one pure function from plain data to text.

#SBATCH lines ask for the resources; the module loads and exports set up the job's shell;
the srun line is the step the plan composed (the one `run` runs inside an allocation).
"""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from hvd_container.launcher import shell

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import UserError
from hvd_container.core.programs import handed_program
from hvd_container.core.text import has_line_ends, is_utf8

OUTPUT_PATTERN = "%x_%j.out"
ERROR_PATTERN = "%x_%j.err"


@dataclass(frozen=True)
class BatchScript:
    """What a batch script says, as plain data."""

    options: list[str]  # each an #SBATCH line: the allocation, then the site's sbatch_options
    site: str
    runtime: str
    controller: str  # its name and why it was chosen
    modules: list[str]  # `module load` before the step
    env: dict[str, str]  # exported before the step
    step: list[str]  # the srun line
    files: dict[str, str] = field(default_factory=dict)  # written before the step: path -> text


# characters sbatch takes as they are in an #SBATCH word; any other makes the value quoted
_PLAIN = frozenset(string.ascii_letters + string.digits + "_./:=,;+@%^-")


def sbatch_word(option: str) -> str:
    """`--flag=value` written so that sbatch reads back exactly `value`.

    sbatch reads an #SBATCH line word by word (src/sbatch/opt.c, _get_argument): whitespace
    ends a word unless quoted, `'` and `"` group, a backslash takes the next character as it
    is, an unquoted `#` ends the line. A value with anything but plain characters is written
    in double quotes with `\\` and `"` escaped; a line break or NUL cannot be written at all."""
    name, eq, value = option.partition("=")
    if has_line_ends(option):
        raise UserError(f"#SBATCH {name}: {value!r} has line breaks or control characters")
    if not is_utf8(option):
        raise UserError(f"#SBATCH {name}: {ascii(value)} is not UTF-8 text")
    if not eq:
        return option if set(option) <= _PLAIN else _quoted(option)
    return f"{name}={value if value and set(value) <= _PLAIN else _quoted(value)}"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _sbatch_line(option: str) -> str:
    return f"#SBATCH {sbatch_word(option)}"


def script_text(script: BatchScript) -> str:
    """The script, every command one line (quoted so that no value can start another)."""
    lines = ["#!/bin/bash", *(_sbatch_line(o) for o in script.options)]
    lines.append(f"# hvd-container: site {script.site}, runtime {script.runtime}")
    # a comment of one line, whatever the script's name holds
    said = "".join(c if c.isprintable() else "?" for c in script.controller)
    lines.append(f"# controller {said}")
    lines.append("")
    if script.modules:
        lines.append(shell.join(["module", "load", *script.modules], one_line=True))
    for name, value in script.env.items():
        lines.append(f"export {name}={shell.quote(value, one_line=True)}")
    if script.modules or script.env:
        lines.append("")
    for path, text in script.files.items():
        lines += file_lines(path, text)
    lines += step_lines(script.step)
    return "\n".join(lines) + "\n"


def step_lines(step: list[str], *, one_line: bool = True) -> list[str]:
    """The srun line as a shell runs it, each of the tool's helper programs in it written
    once above it, as its file has it, and named by a variable there: the line stays short
    enough to read, and srun receives the same words. one_line: each other word on the line
    too (a script's line breaks are its own)."""
    helpers: dict[str, tuple[str, str]] = {}
    words = []
    for word in step:
        file = handed_program(word)
        if file is None:
            words.append(shell.quote(word, one_line=one_line))
            continue
        name = "hvd_" + re.sub(r"\W", "_", Path(file).stem)
        helpers[name] = (file, word)
        words.append(f'"${name}"')
    lines = [line for name, found in helpers.items() for line in _helper_lines(name, *found)]
    return [*lines, " ".join(words)]


_END = "HVD_PROGRAM_END"
_FILE_END = "HVD_FILE_END"


def file_lines(path: str, text: str) -> list[str]:
    """Lines that write `text` to `path` (owner-only, its folder made), byte for byte: a
    here-document read as it is, so the script carries what its step reads."""
    body = text.removesuffix("\n")
    if not text.endswith("\n") or body.endswith("\n") or _FILE_END in body.split("\n"):
        raise UserError(f"{path}: its text cannot be written by a batch script's here-document")
    folder = shell.quote(str(Path(path).parent), one_line=True)
    target = shell.quote(path, one_line=True)
    return [
        f"# {Path(path).name}, read by the srun line below",
        f"(umask 077 && mkdir -p {folder} && cat > {target}) <<'{_FILE_END}'",
        *body.split("\n"),
        _FILE_END,
        "",
    ]


def _helper_lines(name: str, file: str, text: str) -> list[str]:
    """`name` set to the helper's text exactly: a here-document read as it is (no expansion),
    or a quoted word where a here-document could not give the text back byte for byte."""
    body = text.removesuffix("\n")
    if body.endswith("\n") or not text.endswith("\n") or _END in body.split("\n"):
        return [f"# {file}, run by the srun line below", f"{name}={shell.quote(text)}", ""]
    return [
        f"# {file}, run by the srun line below",
        f"IFS= read -r -d '' {name} <<'{_END}' || :",
        *body.split("\n"),
        _END,
        "",
    ]


# the script can carry --env values: readable and runnable by its owner only
SCRIPT_MODE = 0o700


def write_batch_script(target: str, text: str) -> None:
    """Write the script atomically, owner-only, replacing a regular file; a symbolic link is
    refused rather than followed or replaced (either would surprise someone)."""
    path = Path(target)
    if path.is_symlink():
        raise UserError(
            f"-o/--output {target}: is a symbolic link (to {os.readlink(path)}); name the file "
            "itself, or remove the link"
        )
    if path.is_dir():
        raise UserError(f"-o/--output {target}: is a directory, expected a file path")
    try:
        write_text(path, text, mode=SCRIPT_MODE)
    except OSError as exc:
        raise UserError(f"-o/--output {target}: cannot write: {exc.strerror or exc}") from None
