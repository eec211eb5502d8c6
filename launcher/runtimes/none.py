"""No container: the program runs on the host (modules provide the software)."""

from __future__ import annotations

from hvd_container.launcher.runtimes import Invocation, Wrapped


def image_ref(ref: str) -> str:
    return ref


def wrap(inv: Invocation) -> Wrapped:
    return Wrapped([], list(inv.flags) + list(inv.program))
