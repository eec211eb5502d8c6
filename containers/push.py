"""Push an image to a registry, checking every chunk of the push stream for errors.

docker-py reports a failed push only as an `error` key inside an HTTP 200 stream
(docker-py#3161, #3277), so each chunk is inspected. Credentials come from the Docker config
(docker-py reads ~/.docker/config.json) or from HVD_REGISTRY_USERNAME / HVD_REGISTRY_PASSWORD;
they are passed to the engine and never printed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hvd_container.errors import StepFailed, UserError

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_ACCEPT = ", ".join(
    (
        MANIFEST_V2,
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )
)


@dataclass
class PushResult:
    remote: str
    digest: str | None


def remote_ref(image: str, registry: str) -> tuple[str, str]:
    """(repository, tag) of image under registry.

    'cpu-bookworm:1' under 'r:5000' -> ('r:5000/cpu-bookworm', '1').
    """
    registry = registry.strip().rstrip("/")
    for scheme in ("https://", "http://"):
        if registry.startswith(scheme):
            registry = registry[len(scheme) :]
    if not registry or any(c.isspace() for c in registry) or registry.startswith("/"):
        raise UserError(f"--registry {registry!r}: expected HOST[:PORT][/NAMESPACE]")
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


def auth_from_env() -> dict[str, str] | None:
    user = os.environ.get("HVD_REGISTRY_USERNAME")
    password = os.environ.get("HVD_REGISTRY_PASSWORD")
    if user and password:
        return {"username": user, "password": password}
    return None


def push_image(
    api: Any, image: str, registry: str, report: Callable[[str], None] | None = None
) -> PushResult:
    """Tag image as REGISTRY/name:tag and push it; a refused push leaves no new tag behind."""
    import docker.errors
    import requests

    note = report or (lambda _msg: None)
    repo, tag = remote_ref(image, registry)
    remote = f"{repo}:{tag}"
    try:
        api.inspect_image(image)
    except docker.errors.ImageNotFound:
        raise UserError(f"image {image} does not exist locally; build it first") from None
    had_tag = _exists(api, remote)
    api.tag(image, repo, tag)
    ok = False
    try:
        note(f"pushing {remote}")
        try:
            stream = api.push(repo, tag=tag, stream=True, decode=True, auth_config=auth_from_env())
            error, digest = stream_errors(_progress(stream, note))
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            error, digest = (getattr(exc, "explanation", None) or str(exc)).splitlines()[0], None
        if error:
            raise StepFailed(f"push of {remote} refused: {error}")
        ok = True
        return PushResult(remote, digest)
    finally:
        if not ok and not had_tag:
            with contextlib.suppress(docker.errors.APIError):
                api.remove_image(remote, noprune=True)


def _exists(api: Any, ref: str) -> bool:
    import docker.errors

    try:
        api.inspect_image(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def _progress(
    stream: Iterable[dict[str, Any]], note: Callable[[str], None]
) -> Iterable[dict[str, Any]]:
    for chunk in stream:
        status = chunk.get("status")
        if status in ("Pushed", "Layer already exists") and chunk.get("id"):
            note(f"{chunk['id']}: {status}")
        yield chunk


def read_manifest(remote: str, timeout: float = 30) -> dict[str, Any]:
    """The v2 manifest of REGISTRY/name:tag, with its digest under 'digest'.

    Plain http for a loopback registry (as Docker itself allows), https otherwise.
    """
    import requests

    repo, tag = split_tag(remote)
    registry, _, path = repo.partition("/")
    host = registry.split(":")[0]
    scheme = "http" if host in ("localhost", "127.0.0.1", "::1") else "https"
    url = f"{scheme}://{registry}/v2/{path}/manifests/{tag}"
    auth = auth_from_env()
    try:
        resp = requests.get(
            url,
            headers={"Accept": MANIFEST_ACCEPT},
            timeout=timeout,
            auth=(auth["username"], auth["password"]) if auth else None,
        )
    except requests.exceptions.RequestException as exc:
        raise StepFailed(f"cannot read the manifest of {remote}: {type(exc).__name__}") from None
    if resp.status_code != 200:
        raise StepFailed(f"cannot read the manifest of {remote}: HTTP {resp.status_code}")
    manifest: dict[str, Any] = resp.json()
    manifest["digest"] = resp.headers.get("Docker-Content-Digest")
    return manifest
