"""Instruction records -> Singularity/Apptainer definition text.

Written natively, not converted from the Dockerfile: the base becomes the header (Docker's
image, or Singularity's own debootstrap agent), labels %labels, variables %environment and
`export` lines in %post (each RUN's commands run with the variables before them, as in the
Docker build), context files here-documents at the top of %post, Help %help, Test %test.
%post starts with `set -e`, so a failing command fails the build as a failing RUN does.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from hvd_container.containers.instructions import (
    Arg,
    Block,
    Copy,
    CopyFrom,
    Env,
    From,
    Help,
    Label,
    Run,
    Test,
)
from hvd_container.containers.printers import one_line, section_header_problem, shell_command
from hvd_container.containers.printers.dockerfile import MARKER_PREFIX, quote

from hvd_container.core.errors import UserError

DEBIAN_MIRROR = "http://deb.debian.org/debian"
HEREDOC_END = "HVD_CONTAINER_EOF"
# `run IMAGE cmd args` runs cmd; no arguments: a shell
RUNSCRIPT = ('if [ "$#" -eq 0 ]; then', "    exec /bin/bash", "fi", 'exec "$@"')


def debootstrap_header(suite: str) -> list[str]:
    return ["Bootstrap: debootstrap", f"OSVersion: {suite}", f"MirrorURL: {DEBIAN_MIRROR}"]


def _header(base: From, docker_bootstrap: bool) -> list[str]:
    # Apptainer builds for the machine it runs on: the platform stays out (the arch is a label)
    suite = base.debootstrap_suite
    if suite and docker_bootstrap:
        return ["Bootstrap: docker", f"From: debian:{one_line(suite, 'base')}"]
    if suite:
        return debootstrap_header(one_line(suite, "base"))
    return ["Bootstrap: docker", f"From: {one_line(base.image, 'base image')}"]


def _export(env: Env) -> str:
    value = quote(env.value, env.key) if env.quoted else one_line(env.value, env.key)
    return f"export {one_line(env.key, 'env')}={value}"


def _heredoc(copy: Copy) -> list[str]:
    text = copy.data.decode()
    if any(line == HEREDOC_END for line in text.splitlines()):
        raise UserError(f"cannot inline {copy.source}: it has a line {HEREDOC_END}")
    dest = one_line(copy.dest, "COPY")
    # Docker's COPY makes the destination's folders; a here-document in a fresh root does not
    folder = posixpath.dirname(dest) or "/"
    return [f"mkdir -p {folder}", f"cat > {dest} <<'{HEREDOC_END}'", *text.rstrip("\n").split("\n"), HEREDOC_END]  # fmt: skip


def _post_lines(item: object) -> list[str]:
    if isinstance(item, Arg):
        if item.passthrough:
            return [f'export {item.name}="${{{item.name}:-}}"']
        return [f"export {item.name}={one_line(item.default, item.name)}"]
    if isinstance(item, Run):
        return " \\\n&& ".join(shell_command(c, "RUN") for c in item.commands).split("\n")
    if isinstance(item, Env):
        return [_export(item)]
    return []


def _body(line: str) -> str:
    """A line inside a section, refused when Apptainer would read a section header there."""
    problem = section_header_problem(line)
    if problem:
        raise UserError(f"{line.strip()!r}: {problem}")
    return line


def definition(
    header: Iterable[str], blocks: Iterable[Block], *, docker_bootstrap: bool = False
) -> str:
    """The definition file of the blocks; header: comment lines at the top of %post.

    docker_bootstrap: a debootstrap base starts from Docker's debian:<suite> image instead."""
    blocks = list(blocks)
    items = [item for block in blocks for item in block.items]
    bases = [item for item in items if isinstance(item, From)]
    if len(bases) != 1:
        raise ValueError(f"a definition needs exactly one base, got {len(bases)}")
    if bases[0].stage or any(isinstance(item, CopyFrom) for item in items):
        # the blocks of a definition file are one stage (containers/blocks/horovod_wheel.py)
        raise ValueError("a definition file is written from one stage's blocks")
    sections: list[tuple[str, list[str]]] = []
    helps = [one_line(i.text, "description") for i in items if isinstance(i, Help)]
    if helps:
        sections.append(("help", [f"    {text}" for text in helps]))
    labels = [
        f"{one_line(i.key, 'labels')} {one_line(i.value, i.key)}"
        for i in items
        if isinstance(i, Label)
    ]
    if labels:
        sections.append(("labels", labels))
    environment = [_export(i) for i in items if isinstance(i, Env)]
    if environment:
        sections.append(("environment", environment))
    post = ["set -e"]
    for item in items:
        if isinstance(item, Copy):
            post += _heredoc(item)
    post += [f"# {line}" for line in header]
    for index, block in enumerate(blocks):
        if index:
            post.append("")
        post.append(MARKER_PREFIX + block.phase)
        for item in block.items:
            post += _post_lines(item)
    sections.append(("post", post))
    sections.append(("runscript", list(RUNSCRIPT)))
    tests = [one_line(i.command, "checks") for i in items if isinstance(i, Test)]
    if tests:
        sections.append(("test", tests))
    lines = _header(bases[0], docker_bootstrap)
    for name, body in sections:
        lines += ["", f"%{name}", *map(_body, body)]
    return "\n".join(lines) + "\n"
