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

from hvd_container.launcher.checks.declarations import check
from hvd_container.launcher.checks.verdict import Verdict, fail, not_applicable, passed, skip
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.runtimes import (
    RuntimeProfile,
    is_file_ref,
)
from hvd_container.launcher.runtimes._edf import EdfRuntime, literal
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


class SarusSuite(EdfRuntime):
    kinds = ("sarus-suite",)
    srun_option = "--edf"  # Skybox's SPANK option, listed by `srun --help`
    probe_rank = 5  # where the Container Engine is offered too (Alps), it is CSCS's default
    profile_model = SarusSuiteProfile
    profile: SarusSuiteProfile
    title = "Sarus Suite"
    hook_fix = "cuda12 or cuda13"

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

    def nccl_hook(self) -> str:
        return self.profile.aws_ofi_nccl

    def edf(
        self, launch: Launch, image: str, mounts: list[str], workdir: str | None
    ) -> dict[str, Any]:
        devices = [GPU_DEVICE] if self.profile.gpu else []
        return edf_data(image, mounts, workdir, dict(launch.env), devices, self.profile)

    def edf_problems(self, data: dict[str, Any]) -> list[str]:
        return edf_problems(data)


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
