"""podman-hpc: `pull` (which also migrates the image to the squashed store) and `rmsqi`.

From NERSC/podman-hpc's source (1.1.1): `pull` exits non-zero with "Pull failed." when
podman's pull fails (releases before 1.0.2 exited 0 after it: the output is read as well),
but a migration that fails after a good pull is only logged and the exit is 0, so the
squashed store is listed afterwards to confirm. A name already squashed is removed with
`rmsqi` first, so that the store never holds two images under one name (before 1.0.2 a
re-pulled tag could leave the old squashed image behind, #53).
"""

from __future__ import annotations

import getpass
import os
import shlex
import subprocess
from collections.abc import Callable

from hvd_container.containers.convert.publisher import SitePublisher
from hvd_container.containers.convert.shifter import remote

from hvd_container.core.errors import StepFailed, UserError
from hvd_container.core.image_refs import strip_docker_scheme

FAILURE_MARKERS = ("Pull failed", "Error:", "Traceback")


def podman_image_ref(image: str) -> str:
    """podman-hpc refuses Shifter's `docker:` prefix; it wants a plain reference."""
    return strip_docker_scheme(image)


def images_argv(login_host: str | None = None) -> list[str]:
    """List images with their read-only (squashed store) flag and their short ID."""
    listing = ["podman-hpc", "images", "--format", "{{.Repository}}:{{.Tag}} {{.ReadOnly}} {{.ID}}"]
    return remote(listing, login_host)


def migrate_argv(ref: str) -> list[str]:
    return ["podman-hpc", "migrate", ref]


def pull_argv(ref: str, login_host: str | None = None) -> list[str]:
    return remote(["podman-hpc", "pull", ref], login_host)


def rmsqi_argv(ref: str, login_host: str | None = None) -> list[str]:
    return remote(["podman-hpc", "rmsqi", ref], login_host)


# podman-hpc's own lookup (ImageStore.get_img_info) tries these in front of a name; podman
# lists a pulled short name fully qualified (x:1 as docker.io/library/x:1).
_NAME_PREFIXES = ("", "docker.io/", "docker.io/library/", "localhost/")


def store_names(ref: str) -> tuple[str, ...]:
    """The names `images` may list ref under: with `:latest` when it has no tag, as is and
    with each of the prefixes podman-hpc resolves names with."""
    last = ref.rpartition("/")[2]
    if ":" not in last and "@" not in last:
        ref += ":latest"
    return tuple(prefix + ref for prefix in _NAME_PREFIXES)


def squashed(images_output: str, ref: str) -> bool:
    """True if `images` lists ref (under any name podman-hpc resolves it to) as a read-only
    (migrated) image."""
    return bool(squashed_ids(images_output, ref))


def squashed_ids(images_output: str, ref: str) -> set[str]:
    """The short IDs `images` lists ref under as read-only (migrated): "" for a line without
    an ID (a listing without {{.ID}})."""
    names = store_names(ref)
    found = set()
    for line in images_output.splitlines():
        parts = line.split()
        if len(parts) in (2, 3) and parts[0] in names and parts[1].lower() == "true":
            found.add(parts[2].removeprefix("sha256:") if len(parts) == 3 else "")
    return found


def environment() -> dict[str, str]:
    """This process's environment with $USER: podman-hpc takes the user from os.getlogin(),
    else $USER, and neither exists in a batch job or CI without a login terminal."""
    return {**os.environ, "USER": os.environ.get("USER") or getpass.getuser()}


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=environment())
    except FileNotFoundError:
        raise UserError(
            f"{argv[0]} not found: run on a podman-hpc login node or give --login-host"
        ) from None


def _check(argv: list[str], result: subprocess.CompletedProcess[str]) -> None:
    text = (result.stdout or "") + (result.stderr or "")
    failed = next((m for m in FAILURE_MARKERS if m in text), None)
    if result.returncode != 0 or failed:
        last = text.strip().splitlines()[-1] if text.strip() else "no output"
        raise StepFailed(f"{shlex.join(argv)} failed (exit {result.returncode}): {last}")


def pull_and_migrate(
    image: str, *, login_host: str | None = None, on_step: Callable[[str], None] | None = None
) -> str:
    """Pull + migrate ref; a previous squashed copy of the same tag is removed first."""
    ref = podman_image_ref(image)
    step = on_step or (lambda _m: None)
    listing = _run(images_argv(login_host))
    _check(images_argv(login_host), listing)
    if squashed(listing.stdout, ref):
        step(f"removing the previous squashed copy of {ref}")
        argv = rmsqi_argv(ref, login_host)
        _check(argv, _run(argv))
    argv = pull_argv(ref, login_host)
    step(f"running {shlex.join(argv)}")
    _check(argv, _run(argv))
    listing = _run(images_argv(login_host))
    if not squashed(listing.stdout, ref):
        raise StepFailed(
            f"podman-hpc pull {ref} finished but the image is not in the squashed store"
        )
    return ref


def migrate(ref: str, image_id: str) -> None:
    """`podman-hpc migrate ref`: the image into the squashed store, what `podman-hpc run` reads
    on a compute node. A failed migration is only logged (exit 0), so the store is listed
    afterwards: ref must be there, read-only, as image_id."""
    argv = migrate_argv(ref)
    _check(argv, _run(argv))
    listing = _run(images_argv())
    _check(images_argv(), listing)
    short = image_id.removeprefix("sha256:")[:12]
    found = squashed_ids(listing.stdout, ref)
    if not any(short.startswith(i[:12]) for i in found):
        now = f"it holds {', '.join(sorted(found))} under that name" if found else "it is not there"
        raise StepFailed(
            f"{shlex.join(argv)} finished but the squashed store does not hold {ref} as "
            f"{short} ({now}); `podman-hpc --log-level debug migrate {ref}` says why"
        )


def fetch(remote: str, login_host: str | None, step: Callable[[str], None]) -> str:
    """`convert --to podman-hpc`: pulled into podman-hpc's squashed store; its reference."""
    return pull_and_migrate(remote, login_host=login_host, on_step=step)


PUBLISHER = SitePublisher("podman-hpc", "podman-hpc", fetch)
