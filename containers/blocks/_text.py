"""Small helpers every block uses to make the same instruction records the same way."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from hvd_container.containers.instructions import Block, Env, Instruction, Label, Run

PHASES = ("base", "mpi", "frameworks", "horovod", "extras", "checks")

HVD_PIP = "/usr/local/bin/hvd-pip"
VENV = "/opt/venv"


def run(*commands: str) -> Run:
    """One RUN of commands, each of which must succeed."""
    return Run(tuple(commands))


def apt_install(packages: Iterable[str], *, flags: str = "") -> Run:
    """apt-get install with the lists removed in the same layer."""
    names = " ".join(shlex.quote(p) for p in packages)
    options = "--no-install-recommends" + (f" {flags}" if flags else "")
    return run(
        "apt-get update",
        f"apt-get install -y {options} {names}",
        "rm -rf /var/lib/apt/lists/*",
    )


def pip_install(*args: str) -> str:
    """The pip command line inside a RUN: always through hvd-pip, never caching wheels."""
    return "hvd-pip install --no-cache-dir " + " ".join(args)


def pip_wheel(*args: str) -> str:
    """pip building wheels inside a RUN, through hvd-pip, never caching them."""
    return "hvd-pip wheel --no-cache-dir " + " ".join(args)


def env(key: str, value: str, quote: bool = True) -> Env:
    return Env(key, value, quoted=quote)


def label(key: str, value: str) -> Label:
    return Label(key, value)


def block(phase: str, *items: Instruction) -> Block:
    """A block: its phase (which tags log lines of the build), then its instructions."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}")
    return Block(phase, tuple(items))


def major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def module_version_check(module: str, version: str) -> str:
    """A command failing unless the image's Python module has the version the recipe says."""
    code = (
        f"import {module}; v = {module}.__version__; "
        f'assert v.startswith("{version}"), "{module} " + v + " is not {version}"'
    )
    return f"python3 -c '{code}'"
