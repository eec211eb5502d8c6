"""Container runtimes: each turns one invocation into the srun flags and argv it needs.

One module per runtime, each with `image_ref(ref) -> str` (the runtime's own reference
syntax) and `wrap(inv) -> Wrapped`. Modules are imported only when used.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType

_MODULES = {
    "apptainer": "apptainer",
    "singularity": "apptainer",
    "shifter": "shifter",
    "podman-hpc": "podman_hpc",
    "pyxis": "pyxis",
    "charliecloud": "charliecloud",
    "none": "none",
}


@dataclass(frozen=True)
class Invocation:
    """What to run in the container, independent of the runtime."""

    kind: str
    image: str | None
    program: list[str]
    command: str = "exec"  # apptainer/singularity: run | exec
    gpu: bool = True
    flags: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    binds: list[str] = field(default_factory=list)  # SRC:DST[:ro|rw], DST always spelled out
    workdir: str | None = None
    env_names: list[str] = field(default_factory=list)  # values come from srun's environment


@dataclass(frozen=True)
class Wrapped:
    """The runtime's part of the command line, and what it needs around it."""

    srun_flags: list[str]  # options srun itself takes (Pyxis)
    argv: list[str]  # what follows the srun options


def runtime_module(kind: str) -> ModuleType:
    return importlib.import_module(f"hvd_container.launcher.runtimes.{_MODULES[kind]}")


def is_file_ref(ref: str) -> bool:
    return ref.startswith(("/", "./", "../", "~")) or ref.endswith(
        (".sif", ".img", ".sqsh", ".sqfs", ".squashfs", ".tar.gz")
    )
