"""Shifter: `shifter --module=a,b --image=docker:user/img:tag [--volume=SRC:DST] CMD`.

Options stop at the first non-option, so every flag goes before the command; a second
`--module` replaces the first, so modules are always one comma-joined flag.
"""

from __future__ import annotations

from hvd_container.launcher.runtimes import Invocation, Wrapped, is_file_ref

from hvd_container.core.errors import UserError
from hvd_container.core.image_refs import shifter_image_ref


def image_ref(ref: str) -> str:
    if is_file_ref(ref):
        raise UserError(
            f"--image: shifter runs images from its gateway, not files ({ref!r}): push the image to a registry, `shifterimg pull docker:<user>/<image>:<tag>`, and pass that reference"
        )
    # The same reference `convert --to shifter` pulled: no docker.io/ prefix, explicit tag.
    return shifter_image_ref(ref)


def wrap(inv: Invocation) -> Wrapped:
    argv = ["shifter"]
    if inv.modules:
        argv.append("--module=" + ",".join(inv.modules))
    argv.append("--image=" + image_ref(inv.image or ""))
    argv += [f"--volume={bind}" for bind in inv.binds]
    if inv.workdir:
        argv.append(f"--workdir={inv.workdir}")
    argv += inv.flags
    return Wrapped([], argv + inv.program)
