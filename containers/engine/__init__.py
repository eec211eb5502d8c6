"""The engine interface: what the build side asks of a container engine, and nothing more.

Build, verify, push and convert go through `Engine` (repo2docker's model): the Docker engine
through docker-py (containers/engine/docker_api.py), and podman, rootless, through its
Docker-compatible API (containers/engine/podman.py), also as NERSC's podman-hpc wraps it
(its own store, and a squashed copy for compute nodes). `open_engine` is the one place an
engine is made: a command opens one and hands it down. Errors come out engine-neutral:
`EngineError` with the engine's explanation, `EngineUnreachable` when it does not answer.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from hvd_container.core.errors import StepFailed, UserError

EventKind = Literal["step", "log", "cached", "done"]


@dataclass(frozen=True)
class BuildEvent:
    """One thing that happened during a build.

    step: 1-based index of the Dockerfile instruction it belongs to (None before the first);
    stage: where the builder numbers steps within each stage (buildah: `[2/3] STEP 6/6:`), the
    1-based stage, step and total then counting that stage's instructions.
    """

    kind: EventKind
    text: str
    step: int | None = None
    total: int | None = None
    image_id: str | None = None
    stage: int | None = None


class EngineError(Exception):
    """The engine refused or failed a call; str() is its explanation (may span lines)."""


class EngineUnreachable(EngineError):
    """The engine did not answer (stopped, or a call timed out). said: the backend's own line
    for the user (which engine, where, how to start it), where it has one."""

    def __init__(self, reason: str, *, timed_out: bool = False, said: str | None = None) -> None:
        super().__init__(reason)
        self.timed_out = timed_out
        self.said = said


class CommandNotFound(EngineError):
    """The command given to `run` does not exist in the image."""


@contextlib.contextmanager
def engine_errors() -> Iterator[None]:
    """Engine errors that no step turned into its own message become one StepFailed line.

    For calls outside the steps' own handling (image lookups, labelling, cleanup), e.g. an
    engine that stops while a command runs: the user sees one line, never a traceback. Every
    backend raises only the errors above (docker-py's and requests' are translated where they
    are called), so this holds for all of them.
    """
    try:
        yield
    except EngineUnreachable as exc:
        if exc.timed_out:
            raise StepFailed(
                f"the container engine did not answer in time: {_first_line(exc)}"
            ) from None
        raise StepFailed(
            exc.said
            or f"the container engine stopped answering: {_first_line(exc)} (start it again "
            "and run the same command)"
        ) from None
    except EngineError as exc:
        raise StepFailed(f"the container engine failed: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def registry_auth_header(auth: Mapping[str, str]) -> str:
    """The X-Registry-Auth header an engine is sent with these credentials: the Docker Engine
    API's encoding (base64url of the JSON object), which podman's compatible API reads too.
    Known so that an engine's message that echoes it can be redacted."""
    return base64.urlsafe_b64encode(json.dumps(dict(auth)).encode("ascii")).decode()


class Engine(Protocol):
    def build(
        self,
        context: Mapping[str, bytes],
        tag: str,
        buildargs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Iterator[BuildEvent]:
        """Build context (file name -> bytes, with a "Dockerfile") into an image tagged tag;
        the last event is of kind "done" and carries the image id (else StepFailed)."""
        ...

    def inspect(self, ref: str) -> dict[str, Any] | None:
        """The image's record (Id, Architecture, Size, Config.Labels, ...), None if absent."""
        ...

    def tag(self, ref: str, repository: str, tag: str) -> None: ...

    def remove(self, ref: str) -> None:
        """Remove the image name (its layers stay while other names use them)."""
        ...

    def push(
        self, repository: str, tag: str, auth: Mapping[str, str] | None
    ) -> Iterator[dict[str, Any]]:
        """Push to the registry; the engine's progress records (an `error` key on failure)."""
        ...

    def registry_digest(self, remote: str, auth: Mapping[str, str] | None) -> str | None:
        """The digest of the manifest the registry serves for remote."""
        ...

    def pull(self, repository: str, tag: str, auth: Mapping[str, str] | None) -> bool:
        """Pull repository:tag into the engine's store; False where the registry has no such
        manifest (any other failure: EngineError)."""
        ...

    def run(
        self, image: str, argv: list[str], *, timeout: int, labels: Mapping[str, str]
    ) -> tuple[int, str]:
        """(exit status, output) of argv in a fresh container of image, removed afterwards."""
        ...

    def export(self, ref: str) -> AbstractContextManager[Iterator[bytes]]:
        """The image's root filesystem as a tar stream (a container made for it, removed on exit)."""
        ...

    def read_file(self, ref: str, path: str) -> bytes | None:
        """The content of one regular file in the image, None where it has none there."""
        ...

    def bridge_gateway(self) -> str:
        """An address of this host that build containers reach."""
        ...

    def make_runnable(self, ref: str) -> str | None:
        """Put the tagged image where the site's runtime runs it from; a line saying what was
        done, or None where the engine's store is that place already (Docker, podman)."""
        ...


ENGINES = ("auto", "docker", "podman", "podman-hpc")
ENGINE_ENV = "HVD_ENGINE"  # the engine every command opens when none is named
DOCKER_SOCKET = "/var/run/docker.sock"


def chosen_engine(name: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """docker, podman or podman-hpc: the one named (a flag, else $HVD_ENGINE), or for `auto`
    Docker where DOCKER_HOST is set or its socket accepts a connection, else podman where it is
    installed (a login node), else Docker (whose error says how to start it). podman-hpc is
    never guessed: on Perlmutter it is asked for by name, as NERSC's guide has users do."""
    env = os.environ if environ is None else environ
    source = "--engine" if name else f"${ENGINE_ENV}"  # where a wrong name came from
    name = name or env.get(ENGINE_ENV) or "auto"
    if name not in ENGINES:
        raise UserError(f"{source}: engine {name!r} is not known (allowed: {', '.join(ENGINES)})")
    if name != "auto":
        return name
    if env.get("DOCKER_HOST") or accepts(DOCKER_SOCKET) or shutil.which("podman") is None:
        return "docker"
    return "podman"


def accepts(path: str | os.PathLike[str]) -> bool:
    """Whether something accepts connections on the unix socket at path."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(os.fspath(path))
        except OSError:
            return False
    return True


def open_engine(
    name: str | None = None, *, nocache: bool = False, timeout: int | None = None
) -> Engine:
    """The engine called `name` (docker, podman, auto; None: $HVD_ENGINE, else auto),
    connected on first use. nocache: builds reuse no cached layer; timeout: seconds each call
    to the engine may take (default the backend's)."""
    chosen = chosen_engine(name)
    if chosen in ("podman", "podman-hpc"):
        # the backend and its SDK only when an engine is opened: about 150 ms to import
        from hvd_container.containers.engine import podman

        if chosen == "podman-hpc":
            return podman.podman_hpc_engine(nocache=nocache, timeout=timeout)
        return podman.podman_engine(nocache=nocache, timeout=timeout)
    # the same for Docker's: about 150 ms
    from hvd_container.containers.engine import docker_api

    client = docker_api.docker_client(timeout=timeout) if timeout is not None else None
    return docker_api.DockerEngine(client, nocache=nocache)
