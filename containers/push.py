"""Push an image to a registry, checking every chunk of the push stream for errors.

docker-py reports a failed push only as an `error` key inside an HTTP 200 stream
(docker-py#3161, #3277), so each chunk is inspected. Credentials come from
HVD_REGISTRY_USERNAME / HVD_REGISTRY_PASSWORD when both are set, else from the Docker config
(docker-py's APIClient loads ~/.docker/config.json, or $DOCKER_CONFIG, itself when no
auth_config is passed); they go to the engine only, and messages from the engine or registry
are shown with them masked. The pushed manifest's digest is then read back
from the registry through the engine too (`inspect_distribution`), so the read-back uses the same
credentials, token auth and TLS/insecure-registry settings as the push itself.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hvd_container.containers.engine import EngineError, open_engine, registry_auth_header
from hvd_container.containers.transfer import OnTransfer, Transfer

from hvd_container.core.errors import StepFailed, UserError

if TYPE_CHECKING:
    from hvd_container.containers.engine import Engine

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"


@dataclass
class PushResult:
    remote: str
    digest: str | None


# A registry and an optional namespace, as the distribution project's reference grammar has
# them (github.com/distribution/reference, regexp.go): domain components joined by '.', a port,
# then lower-case path components. Anything else is refused before it names a push or a pull.
_DOMAIN = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REGISTRY = re.compile(rf"{_DOMAIN}(?:\.{_DOMAIN})*(?::[0-9]+)?(?:/{_PATH})*")


def remote_ref(image: str, registry: str, flag: str = "--registry") -> tuple[str, str]:
    """(repository, tag) of image under registry (flag: the option named in the error).

    'cpu-bookworm:1' under 'r:5000' -> ('r:5000/cpu-bookworm', '1').
    """
    given = registry
    registry = registry.strip().rstrip("/")
    for scheme in ("https://", "http://"):
        if registry.startswith(scheme):
            registry = registry[len(scheme) :]
    if not REGISTRY.fullmatch(registry):
        raise UserError(
            f"{flag} {given!r}: expected HOST[:PORT][/NAMESPACE] (a host name or address, and "
            "lower-case path components of letters and digits joined by '.', '_', '__' or '-')"
        )
    name, tag = split_tag(image)
    # Re-homing an image that already names a registry: keep only its path.
    first = name.split("/", 1)[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        name = name.split("/", 1)[1]
    return f"{registry}/{name}", tag


def split_tag(image: str) -> tuple[str, str]:
    last = image.rsplit("/", 1)[-1]
    if ":" in last and "@" not in image:
        name, tag = image.rsplit(":", 1)
        return name, tag
    return image, "latest"


def stream_errors(chunks: Iterable[dict[str, Any]]) -> tuple[str | None, str | None]:
    """(first error, pushed digest) from a decoded push stream."""
    digest = None
    for chunk in chunks:
        if chunk.get("error") or chunk.get("errorDetail"):
            detail = chunk.get("errorDetail") or {}
            return str(chunk.get("error") or detail.get("message") or "unknown error"), digest
        aux = chunk.get("aux")
        if isinstance(aux, dict) and aux.get("Digest"):
            digest = str(aux["Digest"])
    return None, digest


USERNAME_ENV = "HVD_REGISTRY_USERNAME"
PASSWORD_ENV = "HVD_REGISTRY_PASSWORD"


def auth_from_env(environ: Mapping[str, str] = os.environ) -> dict[str, str] | None:
    """auth_config from $HVD_REGISTRY_USERNAME/PASSWORD; None: docker-py uses the Docker config.

    Only one of the two set is an error: falling back to the Docker config then would push
    with other credentials than the user meant.
    """
    user = environ.get(USERNAME_ENV)
    password = environ.get(PASSWORD_ENV)
    if user and password:
        return {"username": user, "password": password}
    if user or password:
        given, missing = (USERNAME_ENV, PASSWORD_ENV) if user else (PASSWORD_ENV, USERNAME_ENV)
        raise UserError(
            f"${given} is set but ${missing} is not: set both, or neither to use the Docker "
            "config (~/.docker/config.json)"
        )
    return None


def redact(text: str, auth: Mapping[str, str] | None) -> str:
    """text with the credentials in auth (as given, and as encoded in request headers) masked.

    For messages that come from the engine or the registry: one that echoes the request must
    not show the credentials, neither plain nor in the X-Registry-Auth or Basic encoding.
    Everything is masked, short values too: a mangled message is better than a leaked secret.
    """
    if not auth:
        return text

    user, password = auth.get("username", ""), auth.get("password", "")
    secrets = [
        registry_auth_header(auth),  # X-Registry-Auth, as the engine is sent it
        base64.b64encode(f"{user}:{password}".encode()).decode(),  # HTTP Basic
        password,
        user,
    ]
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def push_image(
    engine: Engine | None,
    image: str,
    registry: str,
    report: Callable[[str], None] | None = None,
    on_transfer: OnTransfer | None = None,
) -> PushResult:
    """Tag image as REGISTRY/name:tag, push it and read its digest back from the registry.

    The registry is checked before the engine is contacted (engine None: the local Docker
    engine, connected only then). A refused push leaves no new tag behind.
    """

    repo, tag = remote_ref(image, registry)
    remote = f"{repo}:{tag}"
    auth = auth_from_env()
    note = report or (lambda _msg: None)
    if engine is None:
        engine = open_engine()
    if engine.inspect(image) is None:
        raise UserError(f"image {image} does not exist locally; build it first")
    had_tag = engine.inspect(remote) is not None
    engine.tag(image, repo, tag)
    ok = False
    try:
        result = push_tagged(engine, repo, tag, auth, note, on_transfer)
        ok = True
    finally:
        if not ok and not had_tag:
            with contextlib.suppress(EngineError):
                engine.remove(remote)
    return result


def push_tagged(
    engine: Engine,
    repo: str,
    tag: str,
    auth: Mapping[str, str] | None,
    note: Callable[[str], None],
    on_transfer: OnTransfer | None = None,
) -> PushResult:
    """Push the local repo:tag (already named for its registry), then read its digest back."""
    remote = f"{repo}:{tag}"
    note(f"pushing {remote}")
    try:
        chunks = _progress(engine.push(repo, tag, auth), note, on_transfer)
        error, digest = stream_errors(chunks)
    except EngineError as exc:
        error, digest = _first_line(exc), None
    if error:
        raise StepFailed(f"push of {remote} refused: {redact(error, auth)}")
    served = read_back_digest(engine, remote, auth)
    if digest and served != digest:
        raise StepFailed(f"pushed {remote} as {digest}, but the registry serves {served}")
    return PushResult(remote, served)


def read_back_digest(engine: Engine, remote: str, auth: Mapping[str, str] | None = None) -> str:
    """The digest of the manifest the registry serves for remote, asked through the engine."""

    try:
        digest = engine.registry_digest(remote, auth)
    except EngineError as exc:
        reason = redact(_one_line(exc), auth)
        raise StepFailed(f"pushed {remote}, but cannot read it back: {reason}") from None
    if not digest:
        raise StepFailed(f"pushed {remote}, but the registry reports no manifest digest for it")
    return digest


def _one_line(exc: BaseException) -> str:
    """The engine's whole explanation (registry errors span lines) on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _progress(
    stream: Iterable[dict[str, Any]],
    note: Callable[[str], None],
    on_transfer: OnTransfer | None = None,
) -> Iterable[dict[str, Any]]:
    """The push stream, with each layer's end as a note and its bytes as Transfer records."""
    sizes: dict[str, int] = {}
    for chunk in stream:
        status = chunk.get("status")
        layer = str(chunk.get("id") or "")
        detail = chunk.get("progressDetail") or {}
        if on_transfer is not None and status == "Pushing" and layer and "current" in detail:
            total = detail.get("total")
            if isinstance(total, int) and total > 0:
                sizes[layer] = total
            on_transfer(Transfer("push", int(detail["current"]), sizes.get(layer), item=layer))
        if status in ("Pushed", "Layer already exists") and layer:
            note(f"{layer}: {status}")
            if on_transfer is not None and layer in sizes:
                on_transfer(Transfer("push", sizes[layer], sizes[layer], item=layer))
        yield chunk
