"""No container: the program runs on the host (modules provide the software)."""

from __future__ import annotations

from typing import Literal

from hvd_container.launcher import guard
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.runtimes import Invocation, Runtime, RuntimeProfile, Wrapped
from pydantic import field_validator


class NoContainerProfile(RuntimeProfile):
    kind: Literal["none"]

    # without a container the profile's words would be the command itself
    @field_validator("flags")
    @classmethod
    def _no_flags(cls, flags: list[str]) -> list[str]:
        if flags:
            raise ValueError(
                "kind none runs the program itself: flags would come before it and replace "
                "it (allowed: none; give options of srun under scheduler.srun_options)"
            )
        return flags

    @field_validator("python")
    @classmethod
    def _usual_python(cls, python: str) -> str:
        why = guard.host_python_refusal(python)
        if why:
            raise ValueError(why)
        return python


class NoContainer(Runtime):
    kinds = ("none",)
    profile_model = NoContainerProfile
    runs_image = False

    def gpu_gap(self, launch: Launch) -> str | None:
        return None  # the host's GPUs

    def wrap(self, inv: Invocation) -> Wrapped:
        return Wrapped([], [*self.profile.flags, *inv.flags, *inv.program])
