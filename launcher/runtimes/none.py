"""No container: the program runs on the host (modules provide the software)."""

from __future__ import annotations

from typing import Literal

from hvd_container.launcher.checks import Launch
from hvd_container.launcher.runtimes import Invocation, Runtime, RuntimeProfile, Wrapped


class NoContainerProfile(RuntimeProfile):
    kind: Literal["none"]


class NoContainer(Runtime):
    kinds = ("none",)
    profile_model = NoContainerProfile
    runs_image = False

    def gpu_gap(self, launch: Launch) -> str | None:
        return None  # the host's GPUs

    def wrap(self, inv: Invocation) -> Wrapped:
        return Wrapped([], [*self.profile.flags, *inv.flags, *inv.program])
