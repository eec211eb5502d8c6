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
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from hvd_container.containers.engine import accepts
from hvd_container.containers.engine.docker_api import DockerEngine, docker_client_at

from hvd_container.core.errors import UserError

PODMAN = "podman"
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
    return _start_private_service()


def _start_private_service() -> str:
    program = shutil.which(PODMAN)
    if program is None:
        raise UserError(
            "--engine podman: podman is not on PATH (install it: apt-get install podman, "
            "dnf install podman; or use --engine docker)"
        )
    folder = Path(tempfile.mkdtemp(prefix="hvd-podman-"))
    sock = folder / "podman.sock"
    log = (folder / "service.log").open("wb")
    # --time=0: no idle timeout (a long build step sends nothing for minutes); stopped at exit
    proc = subprocess.Popen(
        [program, "system", "service", "--time=0", f"unix://{sock}"],
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
                f"--engine podman: `podman system service` did not start: {why} (check "
                "`podman info` as this user: subuid/subgid ranges in /etc/subuid and /etc/subgid)"
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
