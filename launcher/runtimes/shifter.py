"""Shifter: `shifter --module=a,b --image=docker:user/img:tag [--volume=SRC:DST] CMD`.

Options stop at the first non-option, so every flag goes before the command; a second
`--module` replaces the first, so modules are always one comma-joined flag. Naming modules
replaces the administrator's default ones (udiRoot.conf's defaultModules), among them mpich:
an MPI launch names it again. The gpu module brings the driver and devices, an NCCL module
(nccl-plugin) NERSC's NCCL with its network plugin, mpich Cray MPICH (which replaces an
image's libmpi.so.12).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from hvd_container.launcher.checks.verdict import Verdict, warn
from hvd_container.launcher.guard import Flag
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.runtimes import (
    Invocation,
    Runtime,
    RuntimeProfile,
    Wrapped,
    is_file_ref,
)
from pydantic import AfterValidator, Field, field_validator

from hvd_container.core.errors import UserError
from hvd_container.core.image_refs import shifter_image_ref
from hvd_container.core.model import Line, empty_list


def _unique(value: list[str]) -> list[str]:
    if len(set(value)) != len(value):
        raise ValueError("each entry may appear once")
    for name in value:  # joined with commas into one --module=: a comma would add another
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*", name):
            raise ValueError(
                f"{name!r} is not a Shifter module name (letters, digits and _ . + - only)"
            )
    return value


# where Shifter's administrator defines its modules: module_<name>_<setting> = ...
UDIROOT_CONF = "/etc/shifter/udiRoot.conf"
_UDIROOT_MODULE = re.compile(
    r"^module_([A-Za-z0-9_.-]+?)_(?:siteFs|siteEnv|siteEnvAppend|siteEnvPrepend|copyPath|userhook|roothook|enabled)\b",
    re.M,
)


class ShifterProfile(RuntimeProfile):
    # shifter(1): binds only (modules have their own key; the image, the entrypoint, the
    # folder and variables are the launch's)
    known_flags = {"--volume": Flag("bind", "-V")}
    kind: Literal["shifter"]
    modules: Annotated[list[Line], AfterValidator(_unique)] = Field(
        default_factory=empty_list,
        description="Shifter modules, joined into one --module= (a second one would replace the first).",
    )

    @field_validator("flags", mode="before")  # before the guard's: this says where they go
    @classmethod
    def _no_module_flags(cls, flags: Any) -> Any:
        for flag in (f for f in (flags if isinstance(flags, list) else []) if isinstance(f, str)):
            if flag in ("-m", "--module") or flag.startswith(("--module=", "-m")):
                raise ValueError(
                    f"shifter modules go in runtime.modules (a second --module replaces the first), not {flag!r}"
                )
        return flags


class Shifter(Runtime):
    kinds = ("shifter",)
    programs = {"shifter": "shifter"}
    probe_rank = 2
    # the site's file systems (udiRoot.conf's siteFs), which the tool cannot read from here;
    # the home and the working directory lie on them at the sites that run Shifter
    own_mounts = ("~", ".")
    other_mounts = "and the file systems the site lists in udiRoot.conf's siteFs"

    @classmethod
    def probe_modules(cls, run: Callable[[list[str]], str | None]) -> list[str] | str | None:
        try:
            with open(UDIROOT_CONF, encoding="utf-8", errors="replace") as fh:
                text = fh.read(1 << 20)
        except OSError as exc:
            return f"{UDIROOT_CONF}: {exc.strerror or exc}"
        return sorted(set(_UDIROOT_MODULE.findall(text)))

    # the image gateway pulls and converts; shifter itself runs only what it has (NERSC's
    # "shifterimg pull docker:image:tag" before the job)
    pulls_itself = False

    def sbatch_options(self, image: str | None, modules: list[str]) -> list[str]:
        """The image and modules in the header, as NERSC's job scripts give them: Shifter's
        Slurm plugin sets the image up on every node at the job's start (SLURM_SPANK_SHIFTER_*,
        which the shifter command reads; the srun line names them too)."""
        options = [f"--image={self.image_ref(image)}"] if image else []
        return options + ([f"--module={','.join(modules)}"] if modules else [])

    images_listing = ("shifterimg", "images")

    def pull_hint(self, image: str) -> str:
        return f"shifterimg pull {self.image_ref(image)}"

    def pulled(self, image: str, listing: str) -> bool:
        """`shifterimg images` rows: SYSTEM TYPE STATUS DATE TIME NAME (docker READY ... u/i:t)."""
        want = self.image_ref(image).removeprefix("docker:")
        rows = (line.split() for line in listing.splitlines())
        return any(f[1:3] == ["docker", "READY"] and f[-1] == want for f in rows if len(f) >= 4)

    profile_model = ShifterProfile
    accepts_modules = True
    profile: ShifterProfile

    def unusable_image(self, ref: str) -> str | None:
        if is_file_ref(ref):
            return f"--image: shifter runs images from its gateway, not files ({ref!r}): push the image to a registry, `shifterimg pull docker:<user>/<image>:<tag>`, and pass that reference"
        return None

    def image_ref(self, ref: str) -> str:
        problem = self.unusable_image(ref)
        if problem:
            raise UserError(problem)
        # The same reference `convert --to shifter` pulled: no docker.io/ prefix, explicit tag.
        return shifter_image_ref(ref)

    def _merged(self, launch: Launch) -> tuple[list[str], list[str]]:
        """(the profile's modules and --module, once each; those given twice)."""
        merged: list[str] = []
        repeated: list[str] = []
        for name in [*self.profile.modules, *launch.request.modules]:
            (repeated if name in merged else merged).append(name)
        return merged, repeated

    def modules(self, launch: Launch) -> list[str]:
        merged, _ = self._merged(launch)
        if self._needs_mpich(launch, merged):
            merged.append("mpich")
        return merged

    def _needs_mpich(self, launch: Launch, modules: list[str]) -> bool:
        if not modules or "mpich" in modules or launch.single_task:
            return False
        if not launch.controller.uses_host_mpi:
            return False
        return launch.facts is None or launch.facts.mpi_pmi != ()  # an image without MPI needs none

    def module_problem(self, launch: Launch) -> Verdict | None:
        merged, repeated = self._merged(launch)
        if repeated:
            return warn(
                f"shifter module(s) {', '.join(repeated)} given twice: a second --module replaces the first, so they are joined once: --module={','.join(merged)}"
            )
        return None

    def gpu_gap(self, launch: Launch) -> str | None:
        if "gpu" in self.modules(launch):
            return None
        return f"shifter gets no --module=gpu, so the container has no GPU driver or devices; pass --module gpu, or add a shifter runtime with modules: [gpu] to site {launch.site.name}'s profile"

    def injects_host_mpi(self, launch: Launch) -> bool:
        return "mpich" in self.modules(launch)

    def brings_nccl_plugin(self, launch: Launch) -> str | None:
        found = [m for m in self.modules(launch) if "nccl" in m]
        return f"shifter's {found[0]} module" if found else None

    def missing_nccl_plugin(self, launch: Launch) -> str | None:
        if any("nccl" in m for m in self.modules(launch)):
            return None
        return f"NCCL_NET={launch.env['NCCL_NET']} is forced but shifter gets no nccl module, so the plugin is absent and NCCL fails at start: add the site's NCCL module to --module (e.g. nccl-plugin)"

    def wrap(self, inv: Invocation) -> Wrapped:
        argv = ["shifter"]
        if inv.modules:
            argv.append("--module=" + ",".join(inv.modules))
        argv.append("--image=" + self.image_ref(inv.image or ""))
        argv += [f"--volume={bind}" for bind in inv.binds]
        if inv.workdir:
            argv.append(f"--workdir={inv.workdir}")
        argv += [*self.profile.flags, *inv.flags]
        return Wrapped([], argv + inv.program)
