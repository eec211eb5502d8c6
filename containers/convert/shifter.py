"""Shifter image gateway: `shifterimg pull` / `lookup`, locally or over ssh on the login node.

`shifterimg pull` redraws `<time> Pulling Image: docker:x:y, status: S` with `\\r\\x1b[2K` and
exits 0 even when S is FAILURE, so the status is read from its output. `lookup` prints the
image id, exit 1 when no gateway answers.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable, Iterable

from hvd_container.containers.convert.publisher import SitePublisher

from hvd_container.core.errors import StepFailed, UserError
from hvd_container.core.image_refs import shifter_image_ref

__all__ = ["follow_pull", "lookup_argv", "pull_and_lookup", "pull_argv", "shifter_image_ref"]

STATUSES = (
    "INIT",
    "PENDING",
    "PULLING",
    "EXAMINATION",
    "CONVERSION",
    "TRANSFER",
    "HASHING",
    "READY",
    "FAILURE",
    "EXPIRING",
    "EXPIRED",
)
_STATUS = re.compile(r"status:\s*([A-Z]+)")
_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def remote(argv: list[str], login_host: str | None) -> list[str]:
    """Run argv on login_host over ssh (BatchMode: fail instead of asking for a password)."""
    if not login_host:
        return argv
    return ["ssh", "-o", "BatchMode=yes", login_host, shlex.join(argv)]


def pull_argv(ref: str, login_host: str | None = None) -> list[str]:
    return remote(["shifterimg", "pull", ref], login_host)


def lookup_argv(ref: str, login_host: str | None = None) -> list[str]:
    return remote(["shifterimg", "lookup", ref], login_host)


def statuses(output: str) -> list[str]:
    """Every status shown in pull's output (redraws split on \\r and \\n, escapes removed)."""
    found = []
    for piece in re.split(r"[\r\n]", _ESCAPE.sub("", output)):
        match = _STATUS.search(piece)
        if match and match.group(1) in STATUSES:
            found.append(match.group(1))
    return found


def follow_pull(chunks: Iterable[str], on_status: Callable[[str], None] | None = None) -> str:
    """Read pull output as it comes, report each new status, return the last one."""
    last = ""
    buffer = ""
    for chunk in chunks:
        buffer += chunk
        *done, buffer = re.split(r"[\r\n]", buffer)
        for status in statuses("\n".join(done)):
            if status != last and on_status:
                on_status(status)
            last = status
    for status in statuses(buffer):
        if status != last and on_status:
            on_status(status)
        last = status
    return last


def _read_chunks(stream: object) -> Iterable[str]:
    while True:
        data = stream.read1(4096)  # type: ignore[attr-defined]
        if not data:
            return
        yield data.decode(errors="replace")


def pull_and_lookup(
    image: str,
    *,
    login_host: str | None = None,
    on_status: Callable[[str], None] | None = None,
) -> str:
    """Pull image through the gateway, require READY, confirm with lookup; returns the id."""
    ref = shifter_image_ref(image)
    argv = pull_argv(ref, login_host)
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except FileNotFoundError:
        raise UserError(
            f"{argv[0]} not found: run on a Shifter login node or give --login-host"
        ) from None
    assert proc.stdout is not None
    status = follow_pull(_read_chunks(proc.stdout), on_status)
    rc = proc.wait()
    if rc != 0:
        raise StepFailed(f"{shlex.join(argv)} failed (exit {rc}, last status {status or 'none'})")
    if status != "READY":
        raise StepFailed(
            f"shifterimg pull {ref}: the image gateway reported {status or 'no status'} "
            f"(shifterimg exits 0 even then); check that the registry is reachable from the gateway"
        )
    look = subprocess.run(lookup_argv(ref, login_host), capture_output=True, text=True)
    image_id = look.stdout.strip()
    if look.returncode != 0 or not image_id:
        raise StepFailed(
            f"shifterimg lookup {ref}: no image id (exit {look.returncode}): "
            f"{look.stderr.strip() or 'no gateway answered'}"
        )
    return image_id


def fetch(remote: str, login_host: str | None, step: Callable[[str], None]) -> str:
    """`convert --to shifter`: the gateway pulls the pushed image; Shifter's reference."""
    image_id = pull_and_lookup(
        remote, login_host=login_host, on_status=lambda s: step(f"gateway: {s}")
    )
    step(f"shifterimg lookup: {image_id}")
    return shifter_image_ref(remote)


PUBLISHER = SitePublisher("shifter", "shifterimg", fetch)
