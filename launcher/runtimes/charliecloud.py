"""Charliecloud: `ch-run [-b SRC:DST] [-c DIR] IMAGE -- CMD`.

IMAGE is a directory, a SquashFS file or a name in ch-image storage. The host environment
passes in unchanged (PATH included), so the program should name the image's python by path.
"""

from __future__ import annotations

from hvd_container.launcher.runtimes import Invocation, Wrapped


def image_ref(ref: str) -> str:
    return ref


def wrap(inv: Invocation) -> Wrapped:
    argv = ["ch-run"]
    for bind in inv.binds:
        argv += ["-b", bind]
    if inv.workdir:
        argv += ["-c", inv.workdir]
    argv += inv.flags
    argv += [image_ref(inv.image or ""), "--"]
    return Wrapped([], argv + inv.program)
