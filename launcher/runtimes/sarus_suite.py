"""CSCS's Sarus Suite (a beta on Alps): Podman with Parallax's shared SquashFS image store,
started by Slurm's Skybox SPANK plugin from an Environment Definition File: `srun --edf=EDF`.

The EDF is the Container Engine's (raster, the suite's EDF library, reads image, mounts,
workdir, env, annotations, entrypoint, writable and base_environment) plus `devices`, CDI
names (`nvidia.com/gpu=all` gives the container the GPUs). What differs from the CE here:
raster expands `$VAR` and `${VAR}` (shellexpand: `$$` is a `$`) in mounts, workdir, env,
annotations and devices but not in image, so the image is written as given and every other
value with each `$` doubled; a mount is SRC:DST[:FLAGS], both absolute; the image is a
registry reference that Skybox has Podman pull and move into Parallax's store (no files).
Everything after the srun options runs inside the container.

Sources: sarus-suite/skybox src/args.rs (the --edf option; e8bd547), sarus-suite/raster
src/lib.rs, src/mount.rs, src/common.rs and src/schema/edf.json (20f75bd), the suite's own
pages (sarus-suite.github.io: the EDF example with devices and hooks, `srun --edf`), and
cscs-docs clusters/santis.md (the Sarus Suite beta among Alps's runtimes, 2026-09-17).
"""

from __future__ import annotations

from typing import Any, Literal

import tomli_w
from hvd_container.launcher.check_declarations import check
from hvd_container.launcher.launch import Launch
from hvd_container.launcher.runtimes import (
    Invocation,
    Prepared,
    Runtime,
    RuntimeProfile,
    Wrapped,
    bind_working_directory,
    is_file_ref,
)
from hvd_container.launcher.runtimes.container_engine import edf_file, edf_mounts, literal
from hvd_container.launcher.verdict import Verdict, fail, not_applicable, passed, skip
from pydantic import Field

from hvd_container.core.errors import UserError
from hvd_container.core.image_refs import strip_docker_scheme

HOOK_VARIANTS = ("cuda12", "cuda13")  # the AWS OFI NCCL hook's, each linked to that CUDA
GPU_DEVICE = "nvidia.com/gpu=all"  # the CDI name of the node's GPUs (the suite's EDF example)

# raster's EDF keys and their TOML types (src/schema/edf.json)
EDF_KEYS: dict[str, tuple[type, ...]] = {
    "annotations": (dict,),
    "base_environment": (str, list),
    "devices": (list,),
    "entrypoint": (bool,),
    "env": (dict,),
    "image": (str,),
    "mounts": (list,),
    "workdir": (str,),
    "writable": (bool,),
}


class SarusSuiteProfile(RuntimeProfile):
    kind: Literal["sarus-suite"]
    aws_ofi_nccl: Literal["cuda12", "cuda13", "none"] = Field(
        default="cuda12",
        description="The AWS OFI NCCL hook's variant (NCCL over Slingshot through libfabric), "
        "linked to that CUDA major: cuda12 or cuda13 for an image of that CUDA, none for no hook.",
    )
    cxi: bool = Field(
        default=True,
        description="Switch the CXI hook on (Slingshot's libfabric provider in the container).",
    )


def edf_data(
    image: str,
    mounts: list[str],
    workdir: str | None,
    env: dict[str, str],
    devices: list[str],
    profile: SarusSuiteProfile,
) -> dict[str, Any]:
    """The EDF of a launch, as TOML data: the image as given (raster does not expand it), every
    other value literal (`$` doubled)."""
    data: dict[str, Any] = {"image": image}
    if mounts:
        data["mounts"] = [literal(m) for m in mounts]
    if workdir:
        data["workdir"] = literal(workdir)
    if devices:
        data["devices"] = devices
    if env:
        data["env"] = {name: literal(value) for name, value in env.items()}
    hooks: dict[str, Any] = {}
    if profile.cxi:
        hooks["cxi"] = {"enabled": "true"}
    if profile.aws_ofi_nccl != "none":
        hooks["aws_ofi_nccl"] = {"enabled": "true", "variant": profile.aws_ofi_nccl}
    if hooks:
        data["annotations"] = {"com": {"hooks": hooks}}
    return data


def edf_problems(data: dict[str, Any]) -> list[str]:
    """What raster would not take in an EDF (its TOML, parsed): keys it does not know, values of
    the wrong type, mounts not SRC:DST[:FLAGS] with both paths absolute or relative."""
    problems = []
    for key, value in data.items():
        types = EDF_KEYS.get(key)
        if types is None:
            problems.append(f"unknown key {key!r} (allowed: {', '.join(EDF_KEYS)})")
        elif not isinstance(value, types):
            problems.append(f"{key}: a {type(value).__name__}, expected {types[0].__name__}")
    mounts = data.get("mounts")
    for item in mounts if isinstance(mounts, list) else []:
        parts = item.split(":") if isinstance(item, str) else []
        if not 2 <= len(parts) <= 3 or not all(p.startswith(("/", ".")) for p in parts[:2]):
            problems.append(f"mounts: {item!r} is not SOURCE:DESTINATION[:FLAGS]")
    return problems


def registry_ref(ref: str) -> str:
    """A registry reference as Podman pulls it without asking: a name without a registry is
    Docker Hub's, spelled out (Podman's short-name resolution may refuse it without a TTY)."""
    ref = strip_docker_scheme(ref)
    first, sep, rest = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return ref
    return f"docker.io/{ref}" if sep else f"docker.io/library/{ref}"


class SarusSuite(Runtime):
    kinds = ("sarus-suite",)
    srun_option = "--edf"  # Skybox's SPANK option, listed by `srun --help`
    probe_rank = 5  # where the Container Engine is offered too (Alps), it is CSCS's default
    profile_model = SarusSuiteProfile
    profile: SarusSuiteProfile

    def unusable_image(self, ref: str) -> str | None:
        if is_file_ref(ref):
            return (
                f"--image {ref}: Sarus Suite runs registry images (Skybox has Podman pull "
                "them into Parallax's store), not files: `hvd-container push IMAGE` and pass "
                "its registry reference"
            )
        return None

    def image_ref(self, ref: str) -> str:
        problem = self.unusable_image(ref)
        if problem:
            raise UserError(problem)
        return registry_ref(ref)

    def gpu_gap(self, launch: Launch) -> str | None:
        if self.profile.gpu:
            return None  # the EDF names the GPUs' CDI device
        return super().gpu_gap(launch)

    def brings_nccl_plugin(self, launch: Launch) -> str | None:
        hook = self.profile.aws_ofi_nccl
        return None if hook == "none" else f"Sarus Suite's AWS OFI NCCL hook ({hook})"

    def missing_nccl_plugin(self, launch: Launch) -> str | None:
        if self.profile.aws_ofi_nccl == "none":
            return (
                f"NCCL_NET={launch.env.get('NCCL_NET')!r} is forced but the EDF switches no AWS "
                "OFI NCCL hook on (aws_ofi_nccl: none in the sarus-suite runtime of site "
                f"{launch.site.name}'s profile): set aws_ofi_nccl: cuda12 or cuda13 there"
            )
        return None

    def compose_edf(self, launch: Launch) -> tuple[str, Prepared]:
        """The launch's EDF text, and what the launch needs beside it (the working directory
        mounted and made the container's, the script's path inside)."""
        where = bind_working_directory(launch)
        mounts = edf_mounts(launch, where)
        devices = [GPU_DEVICE] if self.profile.gpu else []
        image = self.image_ref(launch.image or "")
        data = edf_data(image, mounts, where.workdir, dict(launch.env), devices, self.profile)
        problems = edf_problems(data)
        if problems:  # the tool's own composition: a bug, said plainly
            raise UserError(
                f"the EDF hvd-container composed is not one Sarus Suite takes: {problems[0]}"
            )
        return tomli_w.dumps(data), where

    def prepare(self, launch: Launch, *, dry_run: bool) -> Prepared:
        text, where = self.compose_edf(launch)
        path = edf_file(text, "Sarus Suite's EDF files", dry_run=dry_run)
        return Prepared(
            launch.image,
            flags=[f"--edf={path}"],
            workdir=where.workdir,
            script=where.script,
            files={str(path): text},
            notes=where.notes,
        )

    def wrap(self, inv: Invocation) -> Wrapped:
        # the image, mounts, devices, working directory and variables are the EDF's (prepare)
        return Wrapped([*inv.flags, *self.profile.flags], list(inv.program))


@check("sarus-nccl-hook", "the EDF's NCCL hook suits the image's CUDA", needs=("facts",))
def nccl_hook(launch: Launch) -> Verdict | None:
    """The hook's cuda12/cuda13 plugin is linked to that CUDA and must match the image's."""
    variant = getattr(launch.runtime.profile, "aws_ofi_nccl", "none")
    if variant == "none":
        return not_applicable("the EDF switches no NCCL hook on")
    assert launch.facts is not None
    cuda = launch.facts.cuda
    if cuda is None:
        return skip(f"the image's CUDA is not known, so the hook's {variant} cannot be judged")
    if not cuda:
        return not_applicable("the image has no CUDA (NCCL does not run there)")
    wanted = f"cuda{cuda.split('.')[0]}"
    if wanted not in HOOK_VARIANTS:
        return fail(
            f"the EDF's AWS OFI NCCL hook has no variant for the image's CUDA {cuda} (it has "
            f"{', '.join(HOOK_VARIANTS)}): build the image with CUDA 12 or 13, or set "
            f"aws_ofi_nccl: none in the sarus-suite runtime of site {launch.site.name}'s profile"
        )
    if wanted != variant:
        return fail(
            f"the EDF's AWS OFI NCCL hook is {variant}, linked to CUDA {variant[4:]}, but the "
            f"image's CUDA is {cuda}: set aws_ofi_nccl: {wanted} in the sarus-suite runtime "
            f"of site {launch.site.name}'s profile"
        )
    return passed(f"{variant} for the image's CUDA {cuda}")
