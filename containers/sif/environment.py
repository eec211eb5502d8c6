"""The environment an image declares, read from the files Apptainer/SingularityCE, the SIF
writer, a definition's %environment or Charliecloud's ch-image leave in it.

Docker ENV is kept in /.singularity.d/env/10-docker2singularity.sh (Go-quoted, see below), a
definition's %environment exports in 90-environment.sh, Charliecloud's in /ch/environment. Every
value is worked out here (`$NAME` of earlier lines expanded); a line that is not a plain export
is skipped with a warning, never run.
"""

from __future__ import annotations

import re
from pathlib import Path

from hvd_container.core.errors import brief
from hvd_container.core.text import ascii_digits

DOCKER_ENV = ".singularity.d/env/10-docker2singularity.sh"
DEFINITION_ENV = ".singularity.d/env/90-environment.sh"
CH_ENVIRONMENT = "ch/environment"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_GO_STRING = r'"(?:[^"\\]|\\.)*"'
# Apptainer/SingularityCE's insertEnv writes `export X="${X:-<v>}"` (older releases without
# the outer quotes), `export X="${X:-}"` for an ENV entry without '=', and
# `export PATH=<v>`; <v> is Go's %q of the value after shell.Escape (\ " ` $ escaped).
_APPTAINER_DEFAULT = re.compile(rf'^export ({_NAME})=("?)\$\{{\1:-({_GO_STRING})?\}}\2$')
_APPTAINER_PLAIN = re.compile(rf"^export ({_NAME})=({_GO_STRING})$")
_REFERENCE = re.compile(rf"\$(?:({_NAME})|\{{({_NAME})\}})")
_GO_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class _Unparsable(ValueError):
    """A line of an environment script that is not a plain export (the message says why)."""


def _go_unquote(text: str) -> str:
    """The string a Go %q literal ("...") stands for."""
    out = bytearray()
    i, body = 0, text[1:-1]
    while i < len(body):
        char = body[i]
        if char != "\\":
            out += char.encode()
            i += 1
            continue
        code = body[i + 1 : i + 2]
        if code in _GO_ESCAPES:
            out += _GO_ESCAPES[code].encode()
            i += 2
        elif code in ('"', "\\", "'"):
            out += code.encode()
            i += 2
        elif code in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[code]
            digits = body[i + 2 : i + 2 + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise _Unparsable(f"bad escape \\{code}{digits} in a Go string")
            value = int(digits, 16)
            out += bytes([value]) if code == "x" else chr(value).encode(errors="replace")
            i += 2 + width
        elif ascii_digits(code[:1]):
            digits = body[i + 1 : i + 4]
            if len(digits) != 3 or not all(c in "01234567" for c in digits):
                raise _Unparsable(f"bad escape \\{digits} in a Go string")
            out.append(int(digits, 8) & 0xFF)
            i += 4
        else:
            raise _Unparsable(f"bad escape \\{code} in a Go string")
    return out.decode(errors="replace")


def _apptainer_value(quoted: str) -> str:
    # the value Docker had: undo %q, then shell.Escape
    return re.sub(r"\\([\\\"`$])", r"\1", _go_unquote(quoted))


def _expand(text: str, i: int, env: dict[str, str]) -> tuple[str, int]:
    """$NAME or ${NAME} at text[i] from what earlier lines set; anything else is refused."""
    match = _REFERENCE.match(text, i)
    if not match:
        raise _Unparsable("uses shell expansion other than $NAME or ${NAME}")
    name = match[1] or match[2]
    if name not in env:
        raise _Unparsable(f"refers to ${name}, which the image does not set before it")
    return env[name], match.end()


def _shell_word(text: str, env: dict[str, str]) -> str:
    """The value of one sh word (quotes, backslashes, $NAME/${NAME}); the rest may be a comment."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in " \t":
            if text[i:].strip() and not text[i:].strip().startswith("#"):
                raise _Unparsable("has more than one word after the =")
            break
        if char == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise _Unparsable("has an unterminated ' quote")
            out.append(text[i + 1 : end])
            i = end + 1
        elif char == '"':
            i += 1
            while True:
                if i >= len(text):
                    raise _Unparsable('has an unterminated " quote')
                char = text[i]
                if char == '"':
                    i += 1
                    break
                if char == "\\" and text[i + 1 : i + 2] in ("$", "`", '"', "\\"):
                    out.append(text[i + 1])
                    i += 2
                elif char == "$":
                    value, i = _expand(text, i, env)
                    out.append(value)
                elif char == "`":
                    raise _Unparsable("uses command substitution")
                else:
                    out.append(char)
                    i += 1
        elif char == "\\":
            if i + 1 >= len(text):
                raise _Unparsable("ends in a line continuation")
            out.append(text[i + 1])
            i += 2
        elif char == "$":
            value, i = _expand(text, i, env)
            out.append(value)
        elif char in "`;&|<>()":
            raise _Unparsable(f"uses the shell operator {char!r}")
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _export(line: str, env: dict[str, str], *, apptainer: bool) -> tuple[str, str] | None:
    """(NAME, VALUE) for one line, None for a comment or blank line; _Unparsable otherwise."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    if apptainer:
        match = _APPTAINER_DEFAULT.match(line)
        if match:
            name, quoted = match[1], match[3]
            if env.get(name):  # ${X:-v}: an earlier value wins
                return name, env[name]
            return name, _apptainer_value(quoted) if quoted else ""
        match = _APPTAINER_PLAIN.match(line)
        if match:
            return match[1], _apptainer_value(match[2])
    match = re.match(rf"^export\s+({_NAME})=(.*)$", line)
    if not match:
        raise _Unparsable("is not `export NAME=VALUE`")
    return match[1], _shell_word(match[2], env)


def image_env(root: Path, warnings: list[str] | None = None) -> dict[str, str]:
    """The image's declared environment, from the files the SIF writer, Apptainer or ch-image
    leave; lines that are not plain exports are skipped with a message in `warnings`."""
    env: dict[str, str] = {}
    for rel in (DOCKER_ENV, DEFINITION_ENV):
        path = root / rel
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            try:
                found = _export(line, env, apptainer=rel == DOCKER_ENV)
            except _Unparsable as exc:
                if warnings is not None:
                    shown = brief(line, 60)
                    warnings.append(
                        f"image {root}: /{rel}:{number}: {shown!r} {exc}: not passed to ch-run; set it with --env if the job needs it"
                    )
                continue
            if found is not None:
                env[found[0]] = found[1]
    ch_env = root / CH_ENVIRONMENT
    if ch_env.is_file():
        for line in ch_env.read_text(errors="replace").splitlines():
            key, sep, value = line.partition("=")
            if sep and key:
                env[key] = value
    return env
