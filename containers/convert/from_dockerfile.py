"""A user's own Dockerfile -> Singularity/Apptainer definition: spython, then fixes for its mistakes.

Recipes do not come this way: their definition is printed natively from the same instruction
records as their Dockerfile (containers/printers/singularity.py). This is for
`hvd-container render --from-dockerfile FILE --format singularity`.

spython 0.3.14 is used only as a parser/writer (never its Client, which shells out to a
`singularity` binary with sudo). What it gets wrong, and what happens here:

- Forms it mis-converts (multi-stage, COPY --chown, multi-key LABEL, ARG containing USER,
  legacy `ENV K v`, exec-form RUN/SHELL, relative COPY, ENTRYPOINT, CMD, USER, WORKDIR) are refused up
  front by `hazards()`; the renderer never emits them, and a Dockerfile that has one is an error.
- `LABEL k="v"` becomes the label line `k="v"` (key with quotes, no value): rewritten `k v`.
- ENV/ARG values land in %post as bare `K=v` assignments, not exported to the commands after
  them (apt would see no DEBIAN_FRONTEND): rewritten `export K=v`; the pip config URL build arg
  is taken from the builder's environment instead of being reset to empty.
- COPY of build-context files becomes a %files line with a relative source: it resolves from
  the directory the definition is built in (the Dockerfile's context), as spython leaves it.
- The runscript becomes `exec /bin/bash "$@"`, so `run img python x.py` would hand `python`
  to bash as a script: replaced by `exec "$@"` (bash when no arguments). %startscript dropped.
- %post starts with `set -e`, so a failing step fails the build as a failing RUN does.
"""

from __future__ import annotations

import re
import shlex

from hvd_container.containers.printers import singularity

from hvd_container.core.errors import UserError, missing_build_extra

try:  # the build extra: a launch-only install renders recipes without it
    from spython.logger import bot
    from spython.main.parse.parsers import DockerParser
    from spython.main.parse.writers import SingularityWriter
except ModuleNotFoundError:
    bot = DockerParser = SingularityWriter = None

PASSTHROUGH_ARGS = ("HVD_PIP_CONFIG_URL",)

RUNSCRIPT = list(singularity.RUNSCRIPT)

_FROM = re.compile(r"^FROM\s", re.I)
_HAZARDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(COPY|ADD)\s+--chown", re.I), "COPY --chown becomes a bogus %files line"),
    (re.compile(r"^(COPY|ADD)\s+--from", re.I), "COPY --from needs a multi-stage build"),
    (re.compile(r"^ARG\s.*USER", re.I), "an ARG containing USER turns into `su -`"),
    (re.compile(r"^USER\s", re.I), "USER turns into `su -` in %post"),
    (re.compile(r"^(RUN|SHELL)\s+\[", re.I), "exec-form RUN/SHELL is copied verbatim"),
    (re.compile(r"^ENTRYPOINT\s", re.I), "ENTRYPOINT+CMD appends arguments to CMD"),
    (re.compile(r"^CMD\s", re.I), "CMD is handed to bash as a script"),
    (re.compile(r"^WORKDIR\s", re.I), "WORKDIR is not carried into the runscript"),
    (re.compile(r"^(ENV|ARG|LABEL)\s.*\\[\"']", re.I), "an escaped quote splits the value"),
]
_ENV_LEGACY = re.compile(r"^ENV\s+[A-Za-z_][A-Za-z0-9_]*\s+\S")
_LABEL_MULTI = re.compile(r'^LABEL\s+(?:[^\s=]+=(?:"(?:[^"\\]|\\.)*"|\S+)\s+)+[^\s=]+=')
_COPY_RELATIVE = re.compile(r"^(COPY|ADD)\s+(?!--)\S+(?:\s+\S+)*\s+(?!/)(\S+)\s*$", re.I)


def instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions with continuation lines joined, comments dropped."""
    out: list[str] = []
    current = ""
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        out.append(current + line)
        current = ""
    if current:
        out.append(current)
    return out


def hazards(dockerfile: str) -> list[str]:
    """Instructions spython is known to convert wrongly, each as `instruction: why`."""
    found = []
    froms = 0
    for inst in instructions(dockerfile):
        if _FROM.search(inst):
            froms += 1
            if froms > 1:
                found.append(f"{inst}: a second stage is merged into the first")
        found += [f"{inst}: {why}" for pattern, why in _HAZARDS if pattern.search(inst)]
        if _ENV_LEGACY.search(inst) and "=" not in inst.split(None, 2)[1]:
            found.append(f"{inst}: legacy `ENV K v` form")
        if _LABEL_MULTI.search(inst):
            found.append(f"{inst}: several keys in one LABEL become one label")
        if re.match(r"^(COPY|ADD)\s", inst, re.I) and _COPY_RELATIVE.match(inst):
            found.append(f"{inst}: relative COPY destination")
    if froms == 0:  # spython would exit the process on it
        found.append("no FROM instruction: the definition needs the image it starts from")
    return found


def _spython_convert(dockerfile: str) -> str:
    """spython's own conversion, with its console logger silenced."""
    saved = bot.level
    bot.level = 0  # QUIET: spython warns on stdout/stderr about files it cannot see
    try:
        parser = DockerParser(None, load=False)
        parser.lines = dockerfile.splitlines(keepends=True)
        try:
            parser.parse()
            return str(SingularityWriter(parser.recipe).convert())
        except (IndexError, ValueError, KeyError) as exc:  # spython's parser on odd quoting
            raise UserError(
                f"Dockerfile cannot be converted: spython failed on it ({type(exc).__name__}: {exc})"
            ) from None
    finally:
        bot.level = saved


def _sections(text: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Header lines, then (section name, lines) in order."""
    header: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        match = re.match(r"^%(\w+)\s*$", line)
        if match:
            sections.append((match.group(1), []))
        elif sections:
            sections[-1][1].append(line)
        else:
            header.append(line)
    return header, sections


def _assignments(dockerfile: str) -> dict[str, str]:
    """%post line (as spython writes it) -> the fixed line, for every ENV and ARG value."""
    parse_env = DockerParser(None, load=False).parse_env
    fixed: dict[str, str] = {}
    for inst in instructions(dockerfile):
        keyword, _, rest = inst.partition(" ")
        if keyword.upper() not in ("ENV", "ARG"):
            continue
        for assignment in parse_env([" " + rest]):
            name = assignment.split("=", 1)[0]
            if keyword.upper() == "ARG" and name in PASSTHROUGH_ARGS:
                fixed[assignment] = f'export {name}="${{{name}:-}}"'
            else:
                fixed[assignment] = f"export {assignment}"
    return fixed


def _label_line(line: str) -> str:
    key, sep, value = line.partition("=")
    if not sep:
        return line
    words = shlex.split(value) if value else [""]
    return f"{key.strip()} {' '.join(words)}".rstrip()


def _header(header: list[str]) -> list[str]:
    # A single stage needs no `Stage:` line.
    return [line for line in header if line.strip() and not line.startswith("Stage:")]


def dockerfile_to_definition(dockerfile: str) -> str:
    """Convert a (single-stage, hazard-free) Dockerfile."""
    problems = hazards(dockerfile)
    if problems:
        raise UserError(f"Dockerfile cannot be converted faithfully: {problems[0]}")
    if DockerParser is None:
        raise missing_build_extra("spython, which converts a Dockerfile,")
    header, sections = _sections(_spython_convert(dockerfile))
    assignments = _assignments(dockerfile)

    out: dict[str, list[str]] = {}
    for name, lines in sections:
        if name == "labels":
            out["labels"] = [_label_line(line) for line in lines if line.strip()]
        elif name == "post":
            out["post"] = [assignments.get(line.strip(), line) for line in lines]
        elif name in ("runscript", "startscript"):
            continue
        else:
            out[name] = [line for line in lines if line.strip()]
    # Like each Docker RUN, a failing command must fail the build.
    out["post"] = ["set -e", *out.get("post", [])]
    for line in out["post"]:
        if line.lstrip().startswith("su -"):  # pragma: no cover - hazards() refuses USER
            raise UserError(f"definition would switch user in %post: {line}")
    out["runscript"] = RUNSCRIPT

    text = _header(header)
    for name in ("files", "labels", "environment", "post", "runscript"):
        if name in out:
            text += ["", f"%{name}", *out[name]]
    return "\n".join(text) + "\n"
