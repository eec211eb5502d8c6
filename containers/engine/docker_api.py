"""The Docker engine behind the engine interface, through docker-py's low-level APIClient.

Builds use the classic builder:

Chosen over BuildKit because docker-py has no BuildKit support (docker/docker-py#2230) and the
rendered Dockerfiles need neither cache mounts nor build secrets: the pip configuration and CA
reach the build through a short-lived HTTP server (containers/pipconfig.py) instead of secrets.
`APIClient.build(decode=True)` streams the log line by line, which gives live progress.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tarfile
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from hvd_container.containers.engine import (
    BuildEvent,
    CommandNotFound,
    EngineError,
    EngineUnreachable,
)

try:  # the build extra: a launch-only install has neither (every entry point says so)
    import docker
    import docker.errors
    import docker.utils
    import requests
except ModuleNotFoundError:
    docker = requests = None  # type: ignore[assignment]

from hvd_container.core.errors import (
    StepFailed,
    UserError,
    brief,
    missing_build_extra,
    source_checkout_hint,
)

# the fix when the engine stops or restarts in the middle of a build
ENGINE_WENT_AWAY = (
    "the Docker engine stopped during the build: start it (`systemctl start docker`) and run "
    "the same build again; the steps that finished come from its cache"
)
RESTART_WAIT = 30.0  # seconds a stopping engine gets to come back before it counts as stopped
ENGINE_RESTARTED = (
    "the Docker engine restarted during this step: run the same build again; the steps that "
    "finished come from its cache"
)

# the classic builder says "Step 2/9 : RUN ...", buildah (podman's API) "STEP 2/9: RUN ...",
# and in a build of several stages "[2/3] STEP 6/6: RUN ..." (steps counted per stage)
_STEP = re.compile(r"^(?:\[(\d+)/\d+\] )?(?:Step|STEP) (\d+)/(\d+) ?: (.*)$")
# "---> Using cache" (classic builder), "--> Using cache 3f2a..." (buildah)
_CACHED = re.compile(r"^-{2,3}> Using cache\b")
# builder bookkeeping, not output of a step: layer ids, commits, tags, removed containers,
# the image id buildah prints last
_BOOKKEEPING = re.compile(
    r"^(?: ?-{2,3}> |Successfully |Removing intermediate container |COMMIT\b|[0-9a-f]{64}$)"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TAIL_LINES = 30


def _require_sdk() -> None:
    """docker-py and requests come with the build extra; a launch-only install lacks them."""
    if docker is None or requests is None:
        raise missing_build_extra("the Docker engine's Python client (docker, requests)")


def docker_client(timeout: int = 600) -> Any:
    """A docker.APIClient for the engine in DOCKER_HOST (default the local socket).

    A missing or stopped daemon becomes one UserError line instead of a traceback.
    """
    _require_sdk()
    try:
        client = docker.APIClient(version="auto", timeout=timeout, **_env_kwargs())
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise UserError(_unreachable(exc)) from None
    return client


def docker_client_at(url: str, timeout: int, engine: str) -> Any:
    """A docker.APIClient on another engine's Docker-compatible API at url (unix://...)."""
    _require_sdk()
    try:
        return docker.APIClient(base_url=url, version="auto", timeout=timeout)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"cannot reach {engine}'s API at {url}: {reason}") from None


def _env_kwargs() -> dict[str, Any]:
    return dict(docker.utils.kwargs_from_env())


def _unreachable(exc: BaseException) -> str:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "No such file" in reason or "Connection refused" in reason or "FileNotFound" in reason:
        reason = "no daemon is listening"
    return (
        f"cannot reach the Docker engine at {host}: {reason} "
        "(start your system's Docker service, e.g. `systemctl start docker`; "
        f"{source_checkout_hint('docker.sh up')})"
    )


def context_tar(files: Mapping[str, bytes]) -> bytes:
    """A reproducible tar of the build context (fixed mtimes/owners, sorted names)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            # Scripts must stay executable inside the image (hvd-pip is COPYed and run).
            info.mode = 0o755 if data.startswith(b"#!") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class DockerEngine:
    """containers.engine.Engine on the local Docker engine (DOCKER_HOST), or on any engine
    that speaks its API (podman's, containers/engine/podman.py).

    host_network: build steps and run containers share the host's network (a rootless engine
    has no bridge the host can serve on; the pip config server then listens on loopback).
    """

    def __init__(
        self, client: Any | None = None, nocache: bool = False, *, host_network: bool = False
    ) -> None:
        if client is None:
            _require_sdk()  # every method imports docker-py: say at once how to get it
        self._client = client
        self.nocache = nocache
        self.host_network = host_network

    @property
    def client(self) -> Any:
        """docker-py's APIClient, connected on first use (a stopped daemon: one UserError)."""
        if self._client is None:
            self._client = docker_client()
        return self._client

    def build(
        self,
        context: Mapping[str, bytes],
        tag: str,
        buildargs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Iterator[BuildEvent]:

        started = int(time.time())
        try:
            stream = self.client.build(
                fileobj=io.BytesIO(context_tar(context)),
                custom_context=True,
                tag=tag or None,
                buildargs=dict(buildargs or {}),
                labels=dict(labels or {}) or None,
                decode=True,
                rm=True,
                forcerm=True,  # remove intermediate containers even when a step fails
                pull=False,
                nocache=self.nocache,
                network_mode="host" if self.host_network else None,
            )
            yield from parse_build_stream(stream)
        except BuildFailed as failed:
            if not failed.message.endswith("non-zero code: 137"):
                raise
            why = self._why_killed(started)
            if why is None:
                raise
            raise BuildFailed(
                f"{failed.message}: {why}", failed.step, failed.total, failed.instruction,
                failed.tail,
            ) from None  # fmt: skip
        except (docker.errors.APIError, requests.exceptions.ConnectionError) as exc:
            raise StepFailed(
                f"docker build of {tag}: {_api_message(exc)}: {ENGINE_WENT_AWAY}"
            ) from None

    def _answers_within(self, seconds: float) -> bool:
        """Whether the engine answers a ping, now or (a restart under way) within seconds."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.client.ping()
                return True
            except (docker.errors.APIError, requests.exceptions.RequestException):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.5)

    def _why_killed(self, since: int) -> str | None:
        """Who SIGKILLed a build step (exit 137), with the fix; None where the engine cannot
        tell (someone else's kill). The engine keeps its events in memory only: a restarted
        engine has none of the step's container left."""
        if not self._answers_within(RESTART_WAIT):
            return ENGINE_WENT_AWAY
        try:
            events = list(
                self.client.events(
                    since=since, until=int(time.time()) + 1, filters={"type": "container"},
                    decode=True,
                )
            )  # fmt: skip
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return ENGINE_RESTARTED  # it answered a ping, then went away again
        actions = {str(e.get("Action") or e.get("status") or "") for e in events}
        if "oom" in actions:
            return (
                "the step ran out of memory (the kernel's OOM killer ended it): give the Docker "
                "engine more memory, or make the step use less (fewer parallel compile jobs)"
            )
        if "start" not in actions:
            return ENGINE_RESTARTED
        return None

    def inspect(self, ref: str) -> dict[str, Any] | None:

        with _neutral():
            try:
                return dict(self.client.inspect_image(ref))
            except docker.errors.ImageNotFound:
                return None

    def tag(self, ref: str, repository: str, tag: str) -> None:
        with _neutral():
            self.client.tag(ref, repository, tag)

    def remove(self, ref: str) -> None:
        with _neutral():
            self.client.remove_image(ref, noprune=True)

    def push(
        self, repository: str, tag: str, auth: Mapping[str, str] | None
    ) -> Iterator[dict[str, Any]]:
        # docker-py reports a failed push only inside the stream (docker-py#3161, #3277)
        with _neutral():
            stream = self.client.push(
                repository, tag=tag, stream=True, decode=True, auth_config=auth
            )
            yield from stream

    def registry_digest(self, remote: str, auth: Mapping[str, str] | None) -> str | None:
        with _neutral():
            info = self.client.inspect_distribution(
                remote, auth_config=dict(auth) if auth else None
            )
        digest = (info.get("Descriptor") or {}).get("digest") if isinstance(info, dict) else None
        return str(digest) if digest else None

    def pull(self, repository: str, tag: str, auth: Mapping[str, str] | None) -> bool:
        with _neutral():
            try:
                stream = self.client.pull(
                    repository, tag=tag, stream=True, decode=True, auth_config=auth
                )
                for chunk in stream:  # a failure after the request began is a record in it
                    error = chunk.get("error") or (chunk.get("errorDetail") or {}).get("message")
                    if error:
                        if _NO_MANIFEST.search(str(error)):
                            return False
                        raise EngineError(str(error))
            except docker.errors.NotFound:
                return False
            except docker.errors.APIError as exc:
                if _NO_MANIFEST.search(_explanation(exc)):
                    return False
                raise
        return True

    def run(
        self, image: str, argv: list[str], *, timeout: int, labels: Mapping[str, str]
    ) -> tuple[int, str]:

        client = self.client
        with _neutral():
            container = client.create_container(
                image, command=argv, labels=dict(labels), network_disabled=False,
                host_config=client.create_host_config(network_mode="host")
                if self.host_network else None,
            )  # fmt: skip
        cid = container["Id"]
        try:
            try:
                client.start(cid)
            except docker.errors.APIError as exc:
                reason = _explanation(exc)
                missing = _NOT_FOUND.search(reason)
                if missing:
                    raise CommandNotFound(
                        f"{missing[1]}: {missing[2]}" if missing[1] else reason
                    ) from None
                raise EngineError(reason) from None
            with _neutral():
                status = client.wait(cid, timeout=timeout)
                out = client.logs(cid, stdout=True, stderr=True).decode(errors="replace")
            return int(status.get("StatusCode", 1)), out
        finally:
            _remove_container(client, cid)

    @contextlib.contextmanager
    def export(self, ref: str) -> Iterator[Iterator[bytes]]:

        client = self.client
        with _neutral():
            # an entrypoint that exists in every image: the container is never started
            cid = client.create_container(ref, entrypoint=["/"], command=[], network_disabled=True)[
                "Id"
            ]
        try:
            yield _neutral_stream(client.export(cid, chunk_size=EXPORT_CHUNK))
        finally:
            _remove_container(client, cid)

    def read_file(self, ref: str, path: str) -> bytes | None:
        client = self.client
        with _neutral():
            # as export: a container made for the read, never started
            cid = client.create_container(ref, entrypoint=["/"], command=[], network_disabled=True)[
                "Id"
            ]
        try:
            with _neutral():
                try:
                    stream, _stat = client.get_archive(cid, path)
                    archive = b"".join(stream)
                except docker.errors.NotFound:
                    return None
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                member = next((m for m in tar.getmembers() if m.isfile()), None)
                handle = tar.extractfile(member) if member is not None else None
                return handle.read() if handle is not None else None
        finally:
            _remove_container(client, cid)

    def bridge_gateway(self) -> str:
        if self.host_network:
            return "127.0.0.1"
        with _neutral():
            networks = self.client.networks(names=["bridge"])
        for net in networks:
            for cfg in (net.get("IPAM") or {}).get("Config") or []:
                if cfg.get("Gateway"):
                    return str(cfg["Gateway"])
        return "172.17.0.1"

    def make_runnable(self, ref: str) -> str | None:
        return None  # the engine's own store is what `docker run` and the converters read


EXPORT_CHUNK = 1024 * 1024
REMOVE_TRIES = (0.0, 1.0, 3.0)  # seconds before each try to remove a throw-away container


def _remove_container(client: Any, cid: str) -> None:
    """Remove a throw-away container, trying again a few times.

    A loaded engine can refuse at first (its overlay mount still busy); a container left
    behind keeps its image from being removed. Gone already is fine; the last refusal is
    swallowed: the result the container gave stands either way.
    """
    for pause in REMOVE_TRIES:
        time.sleep(pause)
        try:
            client.remove_container(cid, force=True)
            return
        except docker.errors.NotFound:
            return
        except (docker.errors.APIError, requests.exceptions.RequestException):
            continue


# How runc/containerd say that the command of a container does not exist in its image.
_NOT_FOUND = re.compile(
    r'(?:exec: "([^"]+)": )?(executable file not found in \$PATH|no such file or directory)', re.I
)


# How registries (distribution's `manifest unknown`) and engines say a tag is not there.
_NO_MANIFEST = re.compile(r"manifest unknown|not found|no such manifest|does not exist", re.I)


def _explanation(exc: BaseException) -> str:
    return str(getattr(exc, "explanation", None) or exc)


@contextlib.contextmanager
def _neutral() -> Iterator[None]:
    """docker-py's and requests' exceptions as the engine interface's."""

    try:
        yield
    except docker.errors.APIError as exc:  # before requests': it subclasses HTTPError
        raise EngineError(_explanation(exc)) from None
    except requests.exceptions.ReadTimeout as exc:
        raise EngineUnreachable(str(exc), timed_out=True) from None
    except requests.exceptions.RequestException as exc:
        timed_out = "timed out" in str(exc).lower()
        raise EngineUnreachable(str(exc), timed_out=timed_out, said=_unreachable(exc)) from None
    except docker.errors.DockerException as exc:
        raise EngineError(_explanation(exc)) from None


def _neutral_stream(chunks: Iterator[bytes]) -> Iterator[bytes]:
    with _neutral():
        yield from chunks


def _api_message(exc: BaseException) -> str:
    text = str(getattr(exc, "explanation", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def parse_build_stream(stream: Iterator[dict[str, Any]]) -> Iterator[BuildEvent]:
    """The builder's JSON messages (Docker's classic builder, or buildah's through podman's
    Docker-compatible API) -> BuildEvents; an error raises StepFailed with context.

    The failure message names the failing instruction and carries the last TAIL_LINES lines of
    its output, as the user needs them to fix the recipe.
    """
    step: int | None = None
    total: int | None = None
    stage: int | None = None
    instruction = ""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    image_id: str | None = None
    pending = ""
    with contextlib.ExitStack() as stack:
        if hasattr(stream, "close"):
            stack.callback(stream.close)  # Ctrl-C: drop the connection, the daemon cancels
        for chunk in stream:
            if "error" in chunk or "errorDetail" in chunk:
                detail = chunk.get("errorDetail") or {}
                message = (chunk.get("error") or detail.get("message") or "unknown error").strip()
                raise BuildFailed(message, step, total, instruction, list(tail))
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("ID"):
                image_id = aux["ID"]
                continue
            text = chunk.get("stream")
            if not text:
                continue
            pending += text
            *lines, pending = pending.split("\n")
            for raw in lines:
                line = _ANSI.sub("", raw).rstrip("\r")
                match = _STEP.match(line)
                if match:
                    stage = int(match[1]) if match[1] else None
                    step, total, instruction = int(match[2]), int(match[3]), match[4]
                    tail.clear()
                    yield BuildEvent("step", instruction, step, total, stage=stage)
                elif _CACHED.match(line.strip()):
                    yield BuildEvent("cached", "---> Using cache", step, total, stage=stage)
                elif _BOOKKEEPING.match(line):
                    continue
                else:
                    tail.append(line)
                    yield BuildEvent("log", line, step, total, stage=stage)
        if pending.strip():
            yield BuildEvent("log", pending, step, total, stage=stage)
    if image_id is None:
        raise BuildFailed(
            "the build ended without producing an image", step, total, instruction, list(tail)
        )
    yield BuildEvent("done", image_id, step, total, image_id=image_id)


class BuildFailed(StepFailed):
    """A Dockerfile instruction failed; carries what the user needs to see."""

    def __init__(
        self, message: str, step: int | None, total: int | None, instruction: str, tail: list[str]
    ) -> None:
        where = (
            f"step {step}/{total} `{brief(instruction, 120)}`" if step else "before the first step"
        )
        super().__init__(f"build failed at {where}: {message}")
        self.message = message
        self.step = step
        self.total = total
        self.instruction = instruction
        self.tail = tail
