"""Podman behind the engine interface: its Docker-compatible API service, rootless.

A login node has no Docker engine and no root; podman builds as the user (subuid/subgid
ranges, no daemon). `podman system service` serves the Docker API on a unix socket, so the
Docker engine's client (docker_api.DockerEngine) drives it unchanged; buildah does the build
and its `STEP n/m:` log is parsed beside the classic builder's. Build steps and verification
containers use the host's network: a rootless podman has no bridge the host can listen on
(its slirp4netns also needs /dev/net/tun), and the pip config server then serves on loopback.

The socket: $CONTAINER_HOST (podman's own setting, unix:// only) or the user's systemd
socket (`systemctl --user start podman.socket`) when it answers; else this process starts a
private service for its own life and stops it on exit.

podman-hpc (NERSC's Perlmutter) is podman with a store of its own (its --root and --runroot on
the login node's local disk) and a squashed copy of each image on the shared file system, the
one `podman-hpc run` reads on compute nodes. Its engine always starts a private service through
`podman-hpc system service` (which passes podman-hpc's store options on), never a socket
serving podman's default store, and after each build runs `podman-hpc migrate`, as NERSC's
guide has users do after `podman-hpc build`. podman-hpc's build hooks (its GPU modules) are
added to `podman-hpc build` only, not to builds through the API: the recipes' builds need none.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from hvd_container.containers.convert import podman_hpc
from hvd_container.containers.engine import accepts
from hvd_container.containers.engine.docker_api import DockerEngine, docker_client_at

from hvd_container.core.errors import UserError

PODMAN = "podman"
PODMAN_HPC = "podman-hpc"
START_WAIT = 20.0  # seconds a private service gets to open its socket


def user_socket(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """Where podman's systemd socket unit listens for this user (root: the system's)."""
    if os.geteuid() == 0:
        return Path("/run/podman/podman.sock")
    runtime = environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.geteuid()}"
    return Path(runtime) / "podman" / "podman.sock"


def service_url() -> str:
    """The unix:// URL of a podman API service for this user, started here if none runs."""
    configured = os.environ.get("CONTAINER_HOST", "")
    if configured:
        if not configured.startswith("unix://"):
            raise UserError(
                f"$CONTAINER_HOST={configured}: --engine podman reaches podman on a unix "
                "socket only (unix:///path/podman.sock); unset it to let hvd-container start one"
            )
        return configured
    systemd = user_socket()
    if accepts(systemd):
        return f"unix://{systemd}"
    return _start_private_service(PODMAN)


INSTALL_HINTS = {
    PODMAN: "install it: apt-get install podman, dnf install podman; or use --engine docker",
    PODMAN_HPC: "it is NERSC's, on Perlmutter's login nodes; elsewhere use --engine podman",
}


def _start_private_service(name: str) -> str:
    """Start `name system service` on a socket of this process's own; its unix:// URL."""
    program = shutil.which(name)
    if program is None:
        raise UserError(f"--engine {name}: {name} is not on PATH ({INSTALL_HINTS[name]})")
    folder = Path(tempfile.mkdtemp(prefix="hvd-podman-"))
    sock = folder / "podman.sock"
    log = (folder / "service.log").open("wb")
    # --time=0: no idle timeout (a long build step sends nothing for minutes); stopped at exit
    proc = subprocess.Popen(
        [program, "system", "service", "--time=0", f"unix://{sock}"], env=podman_hpc.environment(),
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    atexit.register(_stop, proc, folder)
    deadline = time.monotonic() + START_WAIT
    while not accepts(sock):
        if proc.poll() is not None or time.monotonic() > deadline:
            log.close()
            why = _last_line(folder / "service.log") or f"exit status {proc.poll()}"
            _stop(proc, folder)
            raise UserError(
                f"--engine {name}: `{name} system service` did not start: {why} (check "
                f"`{name} info` as this user: subuid/subgid ranges in /etc/subuid and /etc/subgid)"
            )
        time.sleep(0.1)
    log.close()
    return f"unix://{sock}"


def _last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return lines[-1].strip() if lines else ""


def _stop(proc: subprocess.Popen[bytes], folder: Path) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shutil.rmtree(folder, ignore_errors=True)


def podman_engine(*, nocache: bool = False, timeout: int | None = None) -> DockerEngine:
    """The engine on podman's Docker-compatible API (host network for builds and runs)."""
    client = docker_client_at(service_url(), timeout=timeout or 600, engine="podman")
    return DockerEngine(client, nocache=nocache, host_network=True)


class PodmanHpcEngine(DockerEngine):
    """The podman engine on podman-hpc's store; a tagged image is migrated to its squashed one."""

    def make_runnable(self, ref: str) -> str | None:
        """ref is a build's tag, NAME:VERSION."""
        info = self.inspect(ref)
        if info is None:
            raise UserError(f"{ref}: no such image in podman-hpc's store, nothing to migrate")
        # podman finds a short name under any registry's name (127.0.0.1:5000/x:1 for x:1) and
        # its API's tag of a short name that resolves so is a no-op; podman-hpc's migrate looks
        # only under docker.io/ and localhost/: the image is named localhost/NAME:VERSION
        # (podman's own name for an image built here) and migrated by that name
        qualified = f"localhost/{ref}"
        repository, _, tag = qualified.rpartition(":")
        image_id = str(info["Id"])
        self.tag(image_id, repository, tag)
        podman_hpc.migrate(qualified, image_id)
        return f"{ref} is in podman-hpc's squashed store as {qualified}, where `podman-hpc run` finds it"


def podman_hpc_engine(*, nocache: bool = False, timeout: int | None = None) -> PodmanHpcEngine:
    """The engine on podman-hpc's store, through a private `podman-hpc system service`."""
    url = _start_private_service(PODMAN_HPC)
    client = docker_client_at(url, timeout=timeout or 600, engine=PODMAN_HPC)
    return PodmanHpcEngine(client, nocache=nocache, host_network=True)
