"""CSCS's Container Engine (Alps: Clariden, Daint, Santis): `srun --environment=EDF`.

The Environment Definition File (EDF, TOML) says what the container is: `image` (a registry
reference `[REGISTRY#]IMAGE[:TAG]` or a SquashFS file), `mounts` (`SRC:DST[:FLAGS]`),
`workdir`, an `[env]` table and `[annotations]`, where the hooks are switched on (the AWS OFI
NCCL plugin for Slingshot, `com.hooks.aws_ofi_nccl.enabled` and `.variant`). Everything after
the srun options runs inside the container. Sources: eth-cscs/cscs-docs,
docs/software/container-engine/edf.md, run.md and resource-hook.md (2026-08).

The launch writes its EDF into the working directory's .hvd-container folder, named by its
content, and names it on the srun line (CSCS discourages `#SBATCH --environment`): the dry run
shows the file and the path that runs. The CE expands `${VAR}` in every EDF value, so each `$`
of a value is written `$$` (a path or a variable's value never reads the host's environment).
"""

from __future__ import annotations

import os
from typing import Any, Literal

from hvd_container.launcher.checks.declarations import check
from hvd_container.launcher.checks.verdict import Verdict, fail, not_applicable, passed, skip
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.runtimes import (
    RuntimeProfile,
    is_file_ref,
)
from hvd_container.launcher.runtimes._edf import EdfRuntime, literal
from pydantic import Field

from hvd_container.core.image_refs import enroot_image_ref

# The AWS OFI NCCL hook's variants for NVIDIA GPUs (resource-hook.md): cuda-dl is linked to
# CUDA dynamically and suits any CUDA; cuda12/cuda13 must match the image's CUDA major.
NCCL_HOOK_VARIANTS = ("cuda-dl", "cuda12", "cuda13")

SQUASHFS_SUFFIXES = (".sqsh", ".sqfs", ".squashfs")


class ContainerEngineProfile(RuntimeProfile):
    kind: Literal["container-engine"]
    aws_ofi_nccl: Literal["cuda-dl", "cuda12", "cuda13", "none"] = Field(
        default="cuda-dl",
        description="The AWS OFI NCCL hook's variant (NCCL over Slingshot through libfabric): "
        "cuda-dl for any CUDA, cuda12/cuda13 for an image of that CUDA, none for no hook.",
    )


# --------------------------------------------------------------------- the EDF, as data

# EDF keys and the TOML types CSCS documents for them (edf.md)
EDF_KEYS: dict[str, tuple[type, ...]] = {
    "base_environment": (str, list),
    "image": (str,),
    "workdir": (str,),
    "entrypoint": (bool,),
    "writable": (bool,),
    "mounts": (list,),
    "env": (dict,),
    "annotations": (dict,),
}


def edf_data(
    image: str, mounts: list[str], workdir: str | None, env: dict[str, str], nccl_hook: str
) -> dict[str, Any]:
    """The EDF of a launch, as TOML data: every value literal (see `literal`)."""
    data: dict[str, Any] = {"image": literal(image)}
    if mounts:
        data["mounts"] = [literal(m) for m in mounts]
    if workdir:
        data["workdir"] = literal(workdir)
    if env:
        data["env"] = {name: literal(value) for name, value in env.items()}
    if nccl_hook != "none":
        hook = {"enabled": "true", "variant": nccl_hook}
        data["annotations"] = {"com": {"hooks": {"aws_ofi_nccl": hook}}}
    return data


def edf_problems(data: dict[str, Any]) -> list[str]:
    """What in an EDF (its TOML, parsed) the CE would not take: keys it does not know, values
    of the wrong type (edf.md's table of entries)."""
    problems = []
    for key, value in data.items():
        types = EDF_KEYS.get(key)
        if types is None:
            problems.append(f"unknown key {key!r} (allowed: {', '.join(EDF_KEYS)})")
        elif not isinstance(value, types):
            problems.append(f"{key}: a {type(value).__name__}, expected {types[0].__name__}")
    mounts = data.get("mounts")
    for item in mounts if isinstance(mounts, list) else []:
        if not isinstance(item, str) or not item:
            problems.append(f"mounts: {item!r} is not SOURCE[:DESTINATION[:FLAGS]]")
    env = data.get("env")
    for name, value in env.items() if isinstance(env, dict) else []:
        if not isinstance(value, str):
            problems.append(f"env.{name}: a {type(value).__name__}, expected a string")
    return problems


# --------------------------------------------------------------------- the runtime


class ContainerEngine(EdfRuntime):
    kinds = ("container-engine",)
    srun_option = "--environment"  # a Slurm plugin of CSCS's (SPANK), like Pyxis
    probe_rank = 4  # where both are offered (Alps), the CE is CSCS's way
    profile_model = ContainerEngineProfile
    profile: ContainerEngineProfile
    image_files = True
    title = "the Container Engine"
    hook_fix = "cuda-dl"

    def image_ref(self, ref: str) -> str:
        if is_file_ref(ref):
            return os.path.abspath(os.path.expanduser(ref))
        return enroot_image_ref(ref)

    def unusable_image(self, ref: str) -> str | None:
        if is_file_ref(ref) and not ref.endswith(SQUASHFS_SUFFIXES):
            return (
                f"--image {ref}: the Container Engine runs registry images or SquashFS files "
                f"({', '.join(SQUASHFS_SUFFIXES)}): `hvd-container push IMAGE` and pass its "
                "registry reference, or make a .sqsh of it on the cluster with `enroot import "
                "docker://REGISTRY#IMAGE:TAG`"
            )
        return super().unusable_image(ref)

    def gpu_gap(self, launch: Launch) -> str | None:
        return None  # the container gets the GPUs Slurm allocates

    def nccl_hook(self) -> str:
        return self.profile.aws_ofi_nccl

    def edf(
        self, launch: Launch, image: str, mounts: list[str], workdir: str | None
    ) -> dict[str, Any]:
        return edf_data(image, mounts, workdir, dict(launch.env), self.profile.aws_ofi_nccl)

    def edf_problems(self, data: dict[str, Any]) -> list[str]:
        return edf_problems(data)


@check("ce-nccl-hook", "the EDF's NCCL hook suits the image's CUDA", needs=("facts",))
def nccl_hook(launch: Launch) -> Verdict | None:
    """cuda12/cuda13 are linked to that CUDA statically and must match the image's exactly
    (resource-hook.md); cuda-dl suits any."""
    profile = launch.runtime.profile
    variant = getattr(profile, "aws_ofi_nccl", "none")
    if variant == "none":
        return not_applicable("the EDF switches no NCCL hook on")
    if variant == "cuda-dl":
        return passed("cuda-dl: the hook's plugin is linked to CUDA dynamically (any CUDA)")
    assert launch.facts is not None
    cuda = launch.facts.cuda
    if cuda is None:
        return skip(
            f"the image's CUDA is not known, so the hook's {variant} cannot be judged "
            "(cuda-dl suits any CUDA)"
        )
    if not cuda:
        return not_applicable("the image has no CUDA (NCCL does not run there)")
    wanted = f"cuda{cuda.split('.')[0]}"
    if wanted != variant:
        return fail(
            f"the EDF's AWS OFI NCCL hook is {variant}, linked to CUDA {variant[4:]} statically, "
            f"but the image's CUDA is {cuda}: set aws_ofi_nccl: cuda-dl (any CUDA) or {wanted} "
            f"in the container-engine runtime of site {launch.site.name}'s profile"
        )
    return passed(f"{variant} for the image's CUDA {cuda}")


@check(
    "ce-libcudart",
    "the image has the unversioned libcudart.so the hook's NCCL plugin loads",
    needs=("facts",),
)
def libcudart_link(launch: Launch) -> Verdict | None:
    """The AWS OFI NCCL plugin the hook mounts from CSCS's network-stack artifacts (the default
    on Clariden and Daint) or as cuda-dl is linked to CUDA dynamically and loads the unversioned
    libcudart.so: an image with only libcudart.so.N fails when NCCL starts (cscs-docs,
    container-engine/known-issue.md). `verify` records whether the link is there."""
    variant = getattr(launch.runtime.profile, "aws_ofi_nccl", "none")
    if variant == "none":
        return not_applicable("the EDF switches no NCCL hook on")
    assert launch.facts is not None
    if launch.facts.cuda == "":
        return not_applicable("the image has no CUDA (NCCL does not run there)")
    if launch.facts.cudart_link is None:
        return skip(
            "whether the image has the unversioned libcudart.so is not recorded: `hvd-container "
            "verify IMAGE` records it (an image from an hvd-container GPU recipe has it)"
        )
    if not launch.facts.cudart_link:
        return fail(
            f"{launch.facts.source} has no unversioned libcudart.so (verify found only "
            "libcudart.so.N), which the Container Engine's NCCL plugin loads: NCCL would fail "
            "when it starts ('libcudart.so could not be found'): build the image from an "
            "hvd-container GPU recipe (it makes the link), or add `ln -s libcudart.so.N "
            "libcudart.so` in its CUDA lib folder and ldconfig to its build"
        )
    how = "its recipe's build makes it" if launch.facts.recipe_only else "verify found it"
    return passed(f"the image has libcudart.so ({how})")
