"""Apptainer / Singularity: `apptainer {run|exec} [--nv] [-B SRC:DST] [--pwd DIR] IMAGE CMD`.

The host environment passes in (except PATH, HOME, LD_LIBRARY_PATH), so SLURM_*/PMI_* reach
the ranks; `--cleanenv` would drop them (see pitfalls).
"""

from __future__ import annotations

from hvd_container.launcher.runtimes import Invocation, Wrapped, is_file_ref

from hvd_container.core.image_refs import strip_docker_scheme


def image_ref(ref: str) -> str:
    if is_file_ref(ref) or "://" in ref:
        return ref
    return "docker://" + strip_docker_scheme(ref)


def wrap(inv: Invocation) -> Wrapped:
    argv = [inv.kind, inv.command]
    if inv.gpu:
        argv.append("--nv")
    argv += inv.flags
    for bind in inv.binds:
        argv += ["-B", bind]
    if inv.workdir:
        argv += ["--pwd", inv.workdir]
    argv.append(image_ref(inv.image or ""))
    return Wrapped([], argv + inv.program)
