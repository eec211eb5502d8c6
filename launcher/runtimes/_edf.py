"""What the runtimes that start from an EDF share (the Container Engine, Sarus Suite): a Slurm
plugin reads the Environment Definition File that the srun line names (`OPTION=PATH`); the
launch writes it into the working directory's .hvd-container, named by its content, owner-only
(it may hold -e values), and a batch script writes the same file before its step. Both read
`${VAR}` in the EDF's values as the host's variable, so a value is written with each `$`
doubled (`literal`) wherever they expand it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, ClassVar

import tomli_w
from hvd_container.launcher import runtimes
from hvd_container.launcher.plan.binds import split_binds
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.runtimes import (
    TOOL_FOLDER,
    Invocation,
    Prepared,
    Runtime,
    Wrapped,
    bind_working_directory,
    tool_folder,
)

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import UserError


def literal(value: str) -> str:
    """value as the CE and raster read it back unchanged: they expand ${VAR}, $$ is a `$`."""
    return value.replace("$", "$$")


def edf_text(data: dict[str, Any]) -> str:
    return tomli_w.dumps(data)


def edf_path(text: str, folder: Path) -> Path:
    """Where a launch's EDF lies: named by its content, so the same launch names the same file."""
    return folder / f"edf-{hashlib.sha256(text.encode()).hexdigest()[:16]}.toml"


def edf_file(text: str, purpose: str, *, dry_run: bool) -> Path:
    """The EDF's path in the working directory's .hvd-container, written there (owner-only:
    it may hold -e values, as batch scripts do) unless this is a dry run, which makes nothing."""
    if dry_run:  # the same path, nothing made
        return edf_path(text, Path(runtimes.working_directory()) / TOOL_FOLDER)
    path = edf_path(text, tool_folder(purpose))
    try:
        write_text(path, text, mode=0o600)
    except OSError as exc:
        raise UserError(f"EDF {path}: cannot write: {exc.strerror or exc}") from None
    return path


def edf_mounts(launch: Launch, where: Prepared) -> list[str]:
    """The mounts of a launch's EDF: its binds, then what the runtime binds to run it (the
    working directory), each SRC:DST."""
    binds = [str(b) for b in launch.binds]
    return [*binds, *(b for one in where.binds for b in split_binds(one))]


class EdfRuntime(Runtime):
    """A runtime that a Slurm plugin starts from an EDF the srun line names
    (`srun_option=PATH`): the Container Engine (runtimes/container_engine.py) and Sarus Suite
    (runtimes/sarus_suite.py).
    The launch writes the EDF (the image, mounts, working directory, variables, hooks) into the
    working directory's .hvd-container; each runtime says how its EDF is written and checked."""

    title: ClassVar[str]  # the runtime, as messages name it
    hook_fix: ClassVar[str]  # the aws_ofi_nccl value(s) that switch its NCCL hook on

    def nccl_hook(self) -> str:
        """The profile's AWS OFI NCCL hook variant, or "none"."""
        raise NotImplementedError

    def edf(
        self, launch: Launch, image: str, mounts: list[str], workdir: str | None
    ) -> dict[str, Any]:
        """The launch's EDF, as TOML data."""
        raise NotImplementedError

    def edf_problems(self, data: dict[str, Any]) -> list[str]:
        """What in an EDF the runtime would not take."""
        raise NotImplementedError

    def brings_nccl_plugin(self, launch: Launch) -> str | None:
        hook = self.nccl_hook()
        return None if hook == "none" else f"{self.title}'s AWS OFI NCCL hook ({hook})"

    def missing_nccl_plugin(self, launch: Launch) -> str | None:
        if self.nccl_hook() == "none":
            return (
                f"NCCL_NET={launch.env.get('NCCL_NET')!r} is forced but the EDF switches no AWS "
                f"OFI NCCL hook on (aws_ofi_nccl: none in the {self.kind} runtime of site "
                f"{launch.site.name}'s profile): set aws_ofi_nccl: {self.hook_fix} there"
            )
        return None

    def compose_edf(self, launch: Launch) -> tuple[str, Prepared]:
        """The launch's EDF text, and what the launch needs beside it (the working directory
        mounted and made the container's, the script's path inside)."""
        where = bind_working_directory(launch)
        image = self.image_ref(launch.image or "")
        data = self.edf(launch, image, edf_mounts(launch, where), where.workdir)
        problems = self.edf_problems(data)
        if problems:  # the tool's own composition: a bug, said plainly
            raise UserError(
                f"the EDF hvd-container composed is not one {self.title} takes: {problems[0]}"
            )
        return edf_text(data), where

    def prepare(self, launch: Launch, *, dry_run: bool) -> Prepared:
        text, where = self.compose_edf(launch)
        path = edf_file(text, f"{self.title}'s EDF files", dry_run=dry_run)
        return Prepared(
            launch.image,
            flags=[f"{self.srun_option}={path}"],
            workdir=where.workdir,
            script=where.script,
            files={str(path): text},
            notes=where.notes,
        )

    def wrap(self, inv: Invocation) -> Wrapped:
        # the image, mounts, working directory and variables are the EDF's (prepare)
        return Wrapped([*inv.flags, *self.profile.flags], list(inv.program))
