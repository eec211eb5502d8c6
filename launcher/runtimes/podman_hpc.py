"""podman-hpc: `podman-hpc run --rm [--gpu] [-v SRC:DST] [-e NAME] [-w DIR] IMAGE CMD`.

The image must have been pulled (`podman-hpc pull` migrates it to squashfs). podman does not
pass the host environment in, so every variable the launch sets is named with `-e NAME`, and
the ones srun sets for each task with `-e PREFIX*` (podman passes every host variable of that
prefix): ranks find their place and each other through them (Horovod's Gloo rendezvous,
Lightning, PMI). podman-hpc's own shared-run mode passes the same prefixes. podman-hpc takes
the user from a login terminal, else $USER: a batch job has neither, so the launch sets it.
Its modules: --mpi brings Cray MPICH, --cuda-mpi the CUDA-aware Cray MPICH (it excludes --mpi),
--openmpi-pmi2 / --openmpi-pmix what an image's Open MPI needs to start under srun's PMI;
--nccl NCCL's network plugin (NCCL_NET names it). A profile picks one MPI module with
`mpi_module` (NERSC/podman-hpc etc/modules.d: each lists the others as conflicts).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any, Literal

from hvd_container.launcher.checks.declarations import check
from hvd_container.launcher.checks.verdict import Verdict, not_applicable, warn
from hvd_container.launcher.guard import Flag
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.runtimes import (
    Invocation,
    Prepared,
    Runtime,
    RuntimeProfile,
    Wrapped,
    bind_working_directory,
    is_file_ref,
)
from hvd_container.launcher.slurm import current_user
from pydantic import Field, field_validator

from hvd_container.core import yamlconf
from hvd_container.core.errors import UserError
from hvd_container.core.image_refs import strip_docker_scheme

# what srun sets for each task (SLURM_PROCID, ...) and the PMI/PMIx client variables
TASK_ENV = ("SLURM_*", "PMI_*", "PMIX_*")


# mpi_module -> podman-hpc's flag; those that inject the host's Cray MPICH
MPI_MODULES = {
    "mpi": "--mpi",
    "cuda-mpi": "--cuda-mpi",
    "openmpi-pmi2": "--openmpi-pmi2",
    "openmpi-pmix": "--openmpi-pmix",
}
CRAY_MPICH = ("mpi", "cuda-mpi")


class PodmanHpcProfile(RuntimeProfile):
    # podman-run(1) options podman-hpc passes on, and podman-hpc's own --gpu and --nccl
    # modules: namespaces, binds, sizes; not --env, --workdir, --entrypoint, --privileged
    known_flags = {
        "--net": Flag("value"), "--network": Flag("value"), "--ipc": Flag("value"),
        "--pid": Flag("value"), "--uts": Flag("value"), "--userns": Flag("value"),
        "--volume": Flag("bind", "-v"), "--gpu": Flag("none"), "--nccl": Flag("none"),
        "--shm-size": Flag("value"), "--ulimit": Flag("value"), "--log-level": Flag("value"),
        "--hostname": Flag("value"), "--init": Flag("none"), "--read-only": Flag("none"),
        "--rm": Flag("none"),
    }  # fmt: skip
    kind: Literal["podman-hpc"]
    mpi_module: Literal["mpi", "cuda-mpi", "openmpi-pmi2", "openmpi-pmix"] | None = Field(
        default=None,
        description="podman-hpc's MPI module: mpi (Cray MPICH), cuda-mpi (CUDA-aware Cray "
        "MPICH), openmpi-pmi2, openmpi-pmix; one only, they exclude each other.",
    )

    @field_validator("flags", mode="before")  # before the guard's: this says where they go
    @classmethod
    def _no_mpi_flags(cls, flags: Any) -> Any:
        for flag in (f for f in (flags if isinstance(flags, list) else []) if isinstance(f, str)):
            if flag in MPI_MODULES.values():
                name = next(k for k, v in MPI_MODULES.items() if v == flag)
                raise ValueError(
                    f"podman-hpc's MPI modules go in mpi_module (allowed: {', '.join(MPI_MODULES)}), not flags: write mpi_module: {name}"
                )
        return flags


class PodmanHpc(Runtime):
    kinds = ("podman-hpc",)
    programs = {"podman-hpc": "podman-hpc"}
    probe_rank = 4
    runs_digests = True  # podman's NAME@sha256:... (containers/image's grammar)

    @classmethod
    def probe_modules(cls, run: Callable[[list[str]], str | None]) -> list[str] | str | None:
        """The --flags of podman-hpc's modules: `cli_arg` of each file in its modules_dir."""
        info = run(["podman-hpc", "infohpc"])
        if info is None:
            return "its modules_dir is not known"
        found = re.search(r"^modules_dir\b.*?: (\S+)$", info, re.M)
        if not found or not os.path.isdir(found[1]):
            return "podman-hpc infohpc names no readable modules_dir"
        names = []
        for entry in sorted(os.listdir(found[1]))[:200]:
            if not entry.endswith(".yaml"):
                continue
            try:
                with open(os.path.join(found[1], entry), encoding="utf-8") as fh:
                    # nesting, size and aliases limited: a module file is the site's, not ours
                    data = yamlconf.parse(fh.read(1 << 16), entry).data
            except (OSError, UnicodeDecodeError, UserError):
                continue
            flag = data.get("cli_arg") if isinstance(data, dict) else None
            if isinstance(flag, str) and re.fullmatch(r"--[a-z0-9][a-z0-9-]{0,39}", flag):
                names.append(flag)
        return sorted(names)

    profile_model = PodmanHpcProfile
    profile: PodmanHpcProfile
    gpu_flag = "--gpu"

    def unusable_image(self, ref: str) -> str | None:
        if is_file_ref(ref):
            return f"--image: podman-hpc runs pulled images, not files ({ref!r}): `podman-hpc pull <registry>/<image>:<tag>` and pass that reference"
        return None

    def image_ref(self, ref: str) -> str:
        problem = self.unusable_image(ref)
        if problem:
            raise UserError(problem)
        return strip_docker_scheme(ref)  # podman-hpc rejects the `docker:` prefix

    def prepare(self, launch: Launch, *, dry_run: bool) -> Prepared:
        where = bind_working_directory(launch)
        user = launch.request.env.get("USER") or current_user()
        return Prepared(
            launch.image,
            binds=where.binds,
            workdir=where.workdir,
            script=where.script,
            env={"USER": user},
            notes=where.notes,
        )

    def injects_host_mpi(self, launch: Launch) -> bool:
        return self.profile.mpi_module in CRAY_MPICH

    def brings_nccl_plugin(self, launch: Launch) -> str | None:
        return "podman-hpc's nccl module (--nccl)" if "--nccl" in self.profile.flags else None

    def wrap(self, inv: Invocation) -> Wrapped:
        argv = ["podman-hpc", "run", "--rm"]
        if inv.gpu:
            argv.append(self.gpu_flag)
        module = self.profile.mpi_module
        flags = [*([MPI_MODULES[module]] if module else []), *self.profile.flags, *inv.flags]
        argv += flags
        if "NCCL_NET" in inv.env_names and "--nccl" not in flags:
            # NCCL_NET names the network plugin podman-hpc's nccl module brings: without the module
            # NCCL fails at start (NERSC/podman-hpc etc/modules.d/nccl.yaml)
            argv.append("--nccl")
        for bind in inv.binds:
            argv += ["-v", bind]
        for name in inv.env_names:
            argv += ["-e", name]
        for prefix in TASK_ENV:
            argv += ["-e", prefix]
        if inv.workdir:
            argv += ["-w", inv.workdir]
        argv.append(self.image_ref(inv.image or ""))
        return Wrapped([], argv + inv.program)


# podman-hpc's openmpi-pmix module under srun --mpi=pmix fails on Perlmutter, while
# openmpi-pmi2 under --mpi=pmi2 works: NERSC/podman-hpc issue 158, open (checked 2026-11-26)
PMIX_MODULE_ISSUE = "https://github.com/NERSC/podman-hpc/issues/158"


@check("podman-hpc-mpi", "podman-hpc's MPI module starts the ranks", needs=("image",))
def pmix_module(launch: Launch) -> Verdict | None:
    profile = launch.runtime.profile
    if getattr(profile, "mpi_module", None) != "openmpi-pmix":
        return not_applicable("no openmpi-pmix module")
    return warn(
        f"site {launch.site.name}'s podman-hpc entry names mpi_module: openmpi-pmix, which fails "
        f"to start Open MPI ranks under srun --mpi=pmix at NERSC ({PMIX_MODULE_ISSUE}, open): use "
        "mpi_module: openmpi-pmi2 (srun --mpi=pmi2) in your own profile"
    )
