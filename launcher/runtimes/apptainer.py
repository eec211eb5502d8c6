"""Apptainer / Singularity: `apptainer {run|exec} [--nv] [-B SRC:DST] [--pwd DIR] IMAGE CMD`.

The host environment passes in, so srun's SLURM_*/PMI_* reach the ranks; `--cleanenv` (or
`--containall`) drops them, so it is refused for controllers whose program reads them (MPI,
Lightning). PATH, HOME and LD_LIBRARY_PATH never pass in: a launch that sets them gives them
as APPTAINERENV_X (which Apptainer reads, and Singularity reads as SINGULARITYENV_X). Under
`--cleanenv` the prefixed ones are all that pass (internal/pkg/util/env/create.go), so a small
sh wrapper on the node, after the controller's, hands over every variable of the launch under
the prefix (torch's RANK, MASTER_ADDR, ...). A registry image is converted to a SIF by every
rank at once: convert it once first.
"""

from __future__ import annotations

from typing import Literal

from hvd_container.launcher.checks.declarations import check
from hvd_container.launcher.checks.verdict import Verdict, fail, not_applicable
from hvd_container.launcher.guard import Flag
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.runtimes import (
    Invocation,
    Runtime,
    RuntimeProfile,
    Wrapped,
    is_file_ref,
)
from pydantic import Field

from hvd_container.core.image_refs import strip_docker_scheme

# what Apptainer keeps from the host only under its own prefix
NOT_PASSED = ("PATH", "HOME", "LD_LIBRARY_PATH")
CLEANENV_FLAGS = ("--cleanenv", "-e", "--containall", "-C")


class ApptainerProfile(RuntimeProfile):
    # `apptainer exec --help` (Apptainer 1.3): those that neither choose the program, its
    # folder, its home or variables, nor lay files over the image (--mount, --overlay)
    known_flags = {
        "--nv": Flag("none"), "--nvccli": Flag("none"), "--rocm": Flag("none"),
        "--cleanenv": Flag("none", "-e"), "--contain": Flag("none", "-c"),
        "--containall": Flag("none", "-C"), "--writable-tmpfs": Flag("none"),
        "--no-home": Flag("none"), "--no-mount": Flag("value"), "--no-privs": Flag("none"),
        "--no-init": Flag("none"), "--no-umask": Flag("none"), "--no-eval": Flag("none"),
        "--compat": Flag("none"), "--ipc": Flag("none", "-i"), "--pid": Flag("none", "-p"),
        "--userns": Flag("none", "-u"), "--uts": Flag("none"), "--network": Flag("value"),
        "--hostname": Flag("value"), "--disable-cache": Flag("none"),
        "--unsquash": Flag("none"), "--sharens": Flag("none"), "--bind": Flag("bind", "-B"),
    }  # fmt: skip
    kind: Literal["apptainer", "singularity"]
    command: Literal["run", "exec"] = Field(
        default="exec",
        description="run: the image's runscript (NGC images' entrypoint) runs first; exec skips it.",
    )


class Apptainer(Runtime):
    kinds = ("apptainer", "singularity")
    programs = {"apptainer": "apptainer", "singularity": "singularity"}
    probe_rank = 1
    profile_model = ApptainerProfile
    gpu_flag = "--nv"
    image_files = True
    runs_digests = True  # docker://NAME@sha256:... (containers/image's grammar)
    # its default bind paths (Apptainer's "Bind Paths and Mounts": $HOME, the working
    # directory, /tmp and /var/tmp besides /dev, /proc, /sys and a few /etc files)
    own_mounts = ("~", ".", "/tmp", "/var/tmp")
    profile: ApptainerProfile

    def image_ref(self, ref: str) -> str:
        if is_file_ref(ref) or "://" in ref:
            return ref
        return "docker://" + strip_docker_scheme(ref)

    @property
    def prefix(self) -> str:
        return "SINGULARITYENV_" if self.kind == "singularity" else "APPTAINERENV_"

    @property
    def clean(self) -> bool:
        return any(f in CLEANENV_FLAGS for f in self.profile.flags)

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        return {(self.prefix + k if k in NOT_PASSED else k): v for k, v in env.items()}

    def dropped_task_env(self, launch: Launch) -> str | None:
        if self.clean and launch.controller.reads_srun_env:
            return (
                f"runtime.flags: {self.kind} --cleanenv/--containall drops SLURM_*, PMI_* and "
                f"PMIX_*, so --controller {launch.controller.name}'s ranks cannot find each "
                "other: remove it (pass variables with --env), or launch with --controller "
                "torch or torchrun, whose variables are handed over"
            )
        return None

    def handed_over(self, names: list[str], argv: list[str]) -> list[str]:
        """`argv` under --cleanenv: each of `names` that is set, exported under the prefix
        just before the runtime starts (their values are known only on the task's node)."""
        forward = [n for n in names if not n.startswith(self.prefix)]
        if not forward:
            return argv
        text = "".join(f'[ -z "${{{n}+x}}" ] || export {self.prefix}{n}="${n}"; ' for n in forward)
        return ["sh", "-c", text + 'exec "$@"', f"hvd-{self.kind}", *argv]

    def wrap(self, inv: Invocation) -> Wrapped:
        argv = [self.kind, self.profile.command]
        if inv.gpu:
            argv.append(self.gpu_flag)
        argv += [*self.profile.flags, *inv.flags]
        for bind in inv.binds:
            argv += ["-B", bind]
        if inv.workdir:
            argv += ["--pwd", inv.workdir]
        argv.append(self.image_ref(inv.image or ""))
        argv += inv.program
        return Wrapped([], self.handed_over(inv.env_names, argv) if self.clean else argv)


@check(
    "registry-per-rank", "a registry image is converted once, not once per rank", needs=("image",)
)
def registry_image_per_rank(launch: Launch) -> Verdict | None:
    """Given a registry image, every rank converts it to a SIF, all at the same time (each
    pulls every layer and builds its own SIF): convert it once first."""
    assert launch.image is not None
    kind = launch.runtime.kind
    if is_file_ref(launch.image):
        return not_applicable("the image is a file")
    if launch.layout.tasks <= 1:
        return None
    ref = launch.runtime.image_ref(launch.image)
    return fail(
        f"{kind} would convert {ref} into a SIF in each of the {launch.layout.tasks} tasks at "
        f"once: convert it once first (`{kind} pull image.sif {ref}` on the login "
        "node, or `hvd-container convert IMAGE --to sif -o image.sif`) and pass --image "
        "image.sif"
    )
