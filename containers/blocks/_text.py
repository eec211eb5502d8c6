"""Small helpers that every block uses to spell Dockerfile instructions the same way.

Only forms that spython converts correctly are produced: shell-form RUN, one `ENV K=v` and one
`LABEL k="v"` per instruction, absolute COPY destinations.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable

PHASES = ("base", "mpi", "frameworks", "horovod", "extras", "checks")
MARKER_PREFIX = "# hvd-container phase: "

HVD_PIP = "/usr/local/bin/hvd-pip"
VENV = "/opt/venv"


def marker(phase: str) -> str:
    """The comment line the build side uses to tag log lines with a phase."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}")
    return MARKER_PREFIX + phase


def run(*commands: str) -> str:
    """One shell-form RUN of commands joined with &&, one per continuation line."""
    return "RUN " + " \\\n    && ".join(commands)


def apt_install(packages: Iterable[str]) -> str:
    """apt-get install with the lists removed in the same layer."""
    names = " ".join(shlex.quote(p) for p in packages)
    return run(
        "apt-get update",
        f"apt-get install -y --no-install-recommends {names}",
        "rm -rf /var/lib/apt/lists/*",
    )


def pip_install(*args: str) -> str:
    """The pip command line inside a RUN: always through hvd-pip, never caching wheels."""
    return "hvd-pip install --no-cache-dir " + " ".join(args)


def quote_value(value: str) -> str:
    """A Dockerfile ENV/LABEL value in double quotes (backslash and quote escaped)."""
    return json.dumps(value, ensure_ascii=False)


def env(key: str, value: str, quote: bool = True) -> str:
    return f"ENV {key}={quote_value(value) if quote else value}"


def label(key: str, value: str) -> str:
    return f"LABEL {key}={quote_value(value)}"


def block(phase: str, *lines: str) -> str:
    """A block: the phase marker, then its instructions."""
    return "\n".join((marker(phase), *lines)) + "\n"


def major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def module_version_check(module: str, version: str) -> str:
    """A command failing unless the image's Python module has the version the recipe says."""
    code = (
        f"import {module}; v = {module}.__version__; "
        f'assert v.startswith("{version}"), "{module} " + v + " is not {version}"'
    )
    return f"python3 -c '{code}'"
