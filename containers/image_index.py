"""An OCI image index over the images of a recipe that makes one for each of several
architectures, put in the registry beside them: NAME:VERSION then names the pair, and a
runtime that pulls it (Apptainer, enroot, podman, the Container Engine) takes the image of the
machine it runs on.

The engine pushes each image (containers/push.py); a classic Docker engine cannot make an
index, so the index goes to the registry's HTTP API through oras-py, which does the registry's
authentication (bearer tokens, basic credentials, the Docker config) as `docker push` does.
Each image's manifest is read back first: the index names what the registry serves (its media
type, size and digest, checked against the push), never what was meant to be pushed.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hvd_container.containers.push import PushResult, redact, split_tag

try:  # the build extra: a launch-only install has no registry to put an index in
    import oras.container
except ModuleNotFoundError:
    oras = None  # type: ignore[assignment]

from hvd_container.core.errors import StepFailed, UserError, missing_build_extra

INDEX = "application/vnd.oci.image.index.v1+json"
# what a classic Docker engine pushes, and what others do
MANIFESTS = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
)
RECIPE_DIGEST = "org.hvd-container.recipe.digest"
MAX_MANIFEST_BYTES = 4 << 20  # the registry's own limit for a manifest


@dataclass(frozen=True)
class Entry:
    """One image of the index: where it was pushed, its architecture and what the registry
    serves for it."""

    arch: str
    media_type: str
    digest: str
    size: int

    def descriptor(self) -> dict[str, Any]:
        return {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": self.size,
            "platform": {"architecture": self.arch, "os": "linux"},
        }


def index_document(entries: Sequence[Entry], recipe_digest: str) -> bytes:
    """The index's bytes (its digest is theirs): one descriptor an image, in the recipe's
    order, and the digest of the recipe that made them all (every image's lock included)."""
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [entry.descriptor() for entry in entries],
        "annotations": {RECIPE_DIGEST: f"sha256:{recipe_digest}"},
    }
    return json.dumps(index, indent=2).encode()


def plain_http(registry_host: str) -> bool:
    """Whether the registry is spoken to over plain HTTP: a loopback address only, as the
    Docker engine does for a registry it has no TLS settings for."""
    host = urlsplit(f"//{registry_host}").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Registry:
    """The registry's HTTP API for one repository, through oras-py."""

    def __init__(self, repository: str, auth: Mapping[str, str] | None) -> None:
        if oras is None:
            raise missing_build_extra("oras, which puts an image index,")
        # the bounded session of requests and urllib3: about 50 ms, paid where oras's is
        from hvd_container.containers.registry_http import BoundedAdapter

        # imported here: oras's provider pulls in jsonschema, about 500 ms of start-up (2 s with
        # the dev install's format checkers: rfc3987-syntax builds a grammar on import) that
        # inspect and build pay only when they talk to a registry
        from oras.provider import Registry as OrasRegistry

        self.repository = repository
        self.auth = auth
        host = repository.split("/", 1)[0]
        self._client = OrasRegistry(insecure=plain_http(host))
        # oras-py's do_request retries every failure five times, sleeping 3 to 83 s in between
        # (131 s before a registry out of reach is one line), and its requests have no timeout
        # (a registry that accepts and never answers hangs): each request goes once through
        # the unretried function, and the session's adapter bounds and retries it instead
        self._do_request = getattr(OrasRegistry.do_request, "__wrapped__", OrasRegistry.do_request)
        bounded = BoundedAdapter()
        for scheme in ("http://", "https://"):
            self._client.session.mount(scheme, bounded)
        self._container = oras.container.Container(f"{repository}:index")
        if auth:
            self._client.auth.set_basic_auth(auth["username"], auth["password"])
        else:
            self._client.auth.load_configs(self._container)

    def _url(self, reference: str) -> str:
        return f"{self._client.prefix}://{self._container.manifest_url(reference)}"

    def _request(self, method: str, reference: str, **options: Any) -> Any:
        return self._send(method, self._url(reference), **options)

    def manifest(self, reference: str, accept: Sequence[str]) -> tuple[str, bytes]:
        """(media type, bytes) of the manifest the registry serves for reference."""
        response = self._request("GET", reference, headers={"Accept": ", ".join(accept)})
        return self._served(reference, response)

    def find_manifest(self, reference: str, accept: Sequence[str]) -> tuple[str, bytes] | None:
        """As manifest, None where the registry has none at reference."""
        response = self._request("GET", reference, headers={"Accept": ", ".join(accept)})
        return None if response.status_code == 404 else self._served(reference, response)

    def _served(self, reference: str, response: Any) -> tuple[str, bytes]:
        if response.status_code != 200:
            raise StepFailed(
                f"registry {self.repository}: {reference}: {response.status_code} "
                f"{_errors(response)}"
            )
        body = response.content
        if len(body) > MAX_MANIFEST_BYTES:
            raise StepFailed(f"registry {self.repository}: {reference}: a manifest over 4 MiB")
        media_type = str(response.headers.get("Content-Type", "")).split(";")[0].strip()
        return media_type, body

    def put_index(self, tag: str, document: bytes) -> None:
        self.put_manifest(tag, document, INDEX)

    def put_manifest(self, reference: str, document: bytes, media_type: str) -> Mapping[str, str]:
        """PUT a manifest (or index) at reference; the answer's headers."""
        response = self._request(
            "PUT", reference, data=document, headers={"Content-Type": media_type}
        )
        if response.status_code not in (200, 201):
            raise StepFailed(
                f"registry {self.repository}: the manifest {reference} was refused: "
                f"{response.status_code} {_errors(response)}"
            )
        return response.headers

    def _send(self, method: str, url: str, **options: Any) -> Any:
        try:
            return self._do_request(self._client, url, method, **options)
        except Exception as exc:  # requests' and oras' own: the registry is out of reach
            reason = redact(" ".join(str(exc).split()) or type(exc).__name__, self.auth)
            raise StepFailed(f"registry {self.repository}: {reason}") from None

    def put_blob(self, data: bytes) -> None:
        """Upload data as a blob in one PUT (a monolithic upload), unless the registry has it."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        url = f"{self._client.prefix}://{self._container.get_blob_url(digest)}"
        if self._send("HEAD", url).status_code == 200:
            return
        start = self._send("POST", f"{self._client.prefix}://{self._container.upload_blob_url()}")
        location = str(start.headers.get("Location") or "")
        if start.status_code != 202 or not location:
            raise StepFailed(
                f"registry {self.repository}: a blob upload was refused: "
                f"{start.status_code} {_errors(start)}"
            )
        if location.startswith("/"):
            location = f"{self._client.prefix}://{self._container.registry}{location}"
        joined = "&" if "?" in location else "?"
        done = self._send(
            "PUT",
            f"{location}{joined}digest={digest}",
            data=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        if done.status_code != 201:
            raise StepFailed(
                f"registry {self.repository}: the blob {digest} was refused: "
                f"{done.status_code} {_errors(done)}"
            )

    def blob(self, digest: str) -> bytes:
        response = self._send(
            "GET", f"{self._client.prefix}://{self._container.get_blob_url(digest)}"
        )
        if response.status_code != 200:
            raise StepFailed(
                f"registry {self.repository}: blob {digest}: {response.status_code} "
                f"{_errors(response)}"
            )
        if len(response.content) > MAX_MANIFEST_BYTES * 16:
            raise StepFailed(f"registry {self.repository}: blob {digest} is over 64 MiB")
        return bytes(response.content)

    def referrers(self, digest: str) -> list[Any] | None:
        """The referrers API's list for digest; None where the registry has no such API."""
        url = self._url(digest).replace("/manifests/", "/referrers/", 1)
        response = self._send("GET", url, headers={"Accept": INDEX})
        if response.status_code != 200:
            return None
        try:
            listed = response.json().get("manifests", [])
        except (ValueError, AttributeError):
            return None
        return listed if isinstance(listed, list) else None


def _errors(response: Any) -> str:
    """The registry's error messages (its JSON `errors`), else the response's reason."""
    try:
        found = [str(e.get("message") or e.get("code")) for e in response.json().get("errors", [])]
    except (ValueError, AttributeError, TypeError):
        found = []
    return "; ".join(found) or str(response.reason or "")


def served_entry(registry: Registry, arch: str, pushed: PushResult) -> Entry:
    """The index's entry for one pushed image, from what the registry serves for its digest."""
    if not pushed.digest:
        raise StepFailed(f"pushed {pushed.remote}, but its digest is not known")
    media_type, body = registry.manifest(pushed.digest, MANIFESTS)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if digest != pushed.digest:
        raise StepFailed(f"{pushed.remote}: the registry serves {digest}, pushed {pushed.digest}")
    if media_type not in MANIFESTS:
        raise StepFailed(
            f"{pushed.remote}: the registry serves a {media_type or 'manifest without a type'}, "
            f"not an image manifest ({', '.join(MANIFESTS)})"
        )
    return Entry(arch, media_type, digest, len(body))


def push_index(
    remote: str,
    images: Sequence[tuple[str, PushResult]],
    recipe_digest: str,
    auth: Mapping[str, str] | None,
) -> PushResult:
    """Put the index over images ((arch, pushed) each, in the same repository) at remote
    (REPOSITORY:TAG) and read it back; its digest is that of the bytes put."""
    repository, tag = split_tag(remote)
    for arch, pushed in images:
        if split_tag(pushed.remote)[0] != repository:
            raise UserError(
                f"{pushed.remote} ({arch}) is not in {repository}, the index's repository"
            )
    registry = Registry(repository, auth)
    entries = [served_entry(registry, arch, pushed) for arch, pushed in images]
    document = index_document(entries, recipe_digest)
    registry.put_index(tag, document)
    _media_type, served = registry.manifest(tag, [INDEX])
    digest = "sha256:" + hashlib.sha256(served).hexdigest()
    if served != document:
        raise StepFailed(f"put the index {remote}, but the registry serves another ({digest})")
    return PushResult(remote, digest)
