"""podman-hpc: `podman-hpc run --rm [--gpu] [-v SRC:DST] [-e NAME] [-w DIR] IMAGE CMD`.

The image must have been pulled (`podman-hpc pull` migrates it to squashfs). podman does not
pass the host environment in, so every variable the launch sets is named with `-e NAME`, and
the ones srun sets for each task with `-e PREFIX*` (podman passes every host variable of that
prefix): ranks find their place and each other through them (Horovod's Gloo rendezvous,
Lightning, PMI). podman-hpc's own shared-run mode passes the same prefixes.
"""

from __future__ import annotations

from hvd_container.launcher.runtimes import Invocation, Wrapped, is_file_ref

from hvd_container.core.errors import UserError
from hvd_container.core.image_refs import strip_docker_scheme

# what srun sets for each task (SLURM_PROCID, ...) and the PMI/PMIx client variables
TASK_ENV = ("SLURM_*", "PMI_*", "PMIX_*")


def image_ref(ref: str) -> str:
    if is_file_ref(ref):
        raise UserError(
            f"--image: podman-hpc runs pulled images, not files ({ref!r}): `podman-hpc pull <registry>/<image>:<tag>` and pass that reference"
        )
    return strip_docker_scheme(ref)  # podman-hpc rejects the `docker:` prefix


def wrap(inv: Invocation) -> Wrapped:
    argv = ["podman-hpc", "run", "--rm"]
    if inv.gpu:
        argv.append("--gpu")
    argv += inv.flags
    if "NCCL_NET" in inv.env_names and "--nccl" not in inv.flags:
        # NCCL_NET names the network plugin podman-hpc's nccl module brings: without the module
        # NCCL fails at start (NERSC/podman-hpc etc/modules.d/nccl.yaml)
        argv.append("--nccl")
    for bind in inv.binds:
        argv += ["-v", bind]
    for name in inv.env_names:
        argv += ["-e", name]
    for prefix in TASK_ENV:
        argv += ["-e", prefix]
    if inv.workdir:
        argv += ["-w", inv.workdir]
    argv.append(image_ref(inv.image or ""))
    return Wrapped([], argv + inv.program)
