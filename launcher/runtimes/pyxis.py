"""Pyxis + enroot: srun's own `--container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH` flags.

GPUs follow Slurm's allocation; the image's ENV wins over the host's unless a variable is
named in `--container-env`.
"""

from __future__ import annotations

from typing import Literal

from hvd_container.launcher.guard import Flag
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.runtimes import (
    Invocation,
    Runtime,
    RuntimeProfile,
    Wrapped,
    is_file_ref,
)

from hvd_container.core.image_refs import enroot_image_ref


class PyxisProfile(RuntimeProfile):
    kind: Literal["pyxis"]
    # Pyxis's srun options (its README's table) that neither choose the image, its folder,
    # its variables or entrypoint, nor save it to a file
    known_flags = {
        "--container-mounts": Flag("bind"), "--container-writable": Flag("none"),
        "--container-readonly": Flag("none"), "--container-remap-root": Flag("none"),
        "--no-container-remap-root": Flag("none"), "--container-mount-home": Flag("none"),
        "--no-container-mount-home": Flag("none"),
    }  # fmt: skip


class Pyxis(Runtime):
    kinds = ("pyxis",)
    srun_option = "--container-image"  # Pyxis is a plugin of srun
    probe_rank = 5
    profile_model = PyxisProfile
    # nothing but --container-mounts for certain: the home only where enroot's settings or
    # --container-mount-home say so (Pyxis's usage page)
    other_mounts = "the home folder where enroot's settings mount it"

    def image_ref(self, ref: str) -> str:
        return ref if is_file_ref(ref) else enroot_image_ref(ref)

    def gpu_gap(self, launch: Launch) -> str | None:
        return None  # the container gets the GPUs Slurm allocates

    def wrap(self, inv: Invocation) -> Wrapped:
        flags = [f"--container-image={self.image_ref(inv.image or '')}"]
        if inv.binds:
            flags.append("--container-mounts=" + ",".join(inv.binds))  # SRC:DST[:ro|rw]
        if inv.workdir:
            flags.append(f"--container-workdir={inv.workdir}")
        if inv.env_names:
            flags.append("--container-env=" + ",".join(inv.env_names))
        flags += [*self.profile.flags, *inv.flags]
        return Wrapped(flags, list(inv.program))
