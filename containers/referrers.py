"""The bill of materials beside a pushed image: an OCI referrer (OCI distribution spec 1.1), an
artifact manifest whose `subject` is the image's manifest, its one layer the CycloneDX document.

`oras discover`, `regctl artifact list` and registries' own UIs list it under the image. A
registry with the referrers API (`OCI-Subject` in the answer to the manifest's PUT) indexes it
itself; one without (the distribution registry 2.x) gets the spec's fallback: an image index at
the tag `sha256-<hex of the subject's digest>` listing the referrers, which this module keeps
(read, add, put back), as oras does. Read back the same two ways.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hvd_container.containers import materials
from hvd_container.containers.engine import open_engine
from hvd_container.containers.image_index import INDEX, MANIFESTS, Registry
from hvd_container.containers.push import PushResult, auth_from_env, push_image, split_tag

from hvd_container import facts
from hvd_container.core.errors import StepFailed, UserError

if TYPE_CHECKING:
    from hvd_container.containers.engine import Engine
    from hvd_container.containers.transfer import OnTransfer

ARTIFACT_TYPE = "application/vnd.cyclonedx+json"  # CycloneDX's own media type for its JSON
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"  # the spec's empty config for an artifact: `{}`
EMPTY_DATA = b"{}"
TITLE = "org.opencontainers.image.title"


@dataclass(frozen=True)
class Subject:
    """The image manifest a referrer points at, as the registry serves it."""

    media_type: str
    digest: str
    size: int

    def descriptor(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def artifact_manifest(subject: Subject, document: bytes) -> bytes:
    """The referrer's manifest: the document as its one layer, the empty config."""
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": ARTIFACT_TYPE,
        "config": {"mediaType": EMPTY, "digest": _digest(EMPTY_DATA), "size": len(EMPTY_DATA)},
        "layers": [
            {
                "mediaType": ARTIFACT_TYPE,
                "digest": _digest(document),
                "size": len(document),
                "annotations": {TITLE: "bom.cdx.json"},
            }
        ],
        "subject": subject.descriptor(),
    }
    return json.dumps(manifest, indent=2).encode()


def fallback_tag(digest: str) -> str:
    """The referrers tag schema's tag for a subject digest: `sha256:abc` -> `sha256-abc`."""
    return digest.replace(":", "-", 1)


def subject_of(registry: Registry, reference: str) -> Subject:
    """The image manifest the registry serves for reference (a tag or a digest)."""
    media_type, body = registry.manifest(reference, MANIFESTS)
    if media_type not in MANIFESTS:
        raise StepFailed(
            f"{registry.repository}:{reference}: the registry serves a "
            f"{media_type or 'manifest without a type'}, not an image manifest"
        )
    return Subject(media_type, _digest(body), len(body))


def attach(registry: Registry, subject: Subject, document: bytes) -> str:
    """Put the document beside subject as a referrer; the referrer manifest's digest."""
    registry.put_blob(EMPTY_DATA)
    registry.put_blob(document)
    manifest = artifact_manifest(subject, document)
    digest = _digest(manifest)
    answer = registry.put_manifest(digest, manifest, OCI_MANIFEST)
    if answer.get("OCI-Subject") != subject.digest:
        _add_to_fallback(registry, subject, digest, len(manifest))
    return digest


def _add_to_fallback(registry: Registry, subject: Subject, digest: str, size: int) -> None:
    tag = fallback_tag(subject.digest)
    found = registry.find_manifest(tag, [INDEX])
    index: dict[str, Any] = (
        json.loads(found[1]) if found else {"schemaVersion": 2, "mediaType": INDEX, "manifests": []}
    )
    entries = [m for m in index.get("manifests", []) if m.get("digest") != digest]
    entries.append(
        {"mediaType": OCI_MANIFEST, "digest": digest, "size": size, "artifactType": ARTIFACT_TYPE}
    )
    index["manifests"] = entries
    registry.put_manifest(tag, json.dumps(index, indent=2).encode(), INDEX)


def referrers(registry: Registry, subject_digest: str) -> list[Mapping[str, Any]]:
    """The referrers of subject_digest: the registry's API, else the fallback tag's index."""
    listed = registry.referrers(subject_digest)
    if listed is None:
        found = registry.find_manifest(fallback_tag(subject_digest), [INDEX])
        listed = json.loads(found[1]).get("manifests", []) if found else []
    return [m for m in listed if isinstance(m, Mapping)]


def find(registry: Registry, reference: str) -> bytes:
    """The bill of materials beside the image at reference (a tag or a digest), checked
    against its digest in the referrer manifest and against the label the image's own
    configuration records (a document that is not this image's is refused)."""
    subject = subject_of(registry, reference)
    _media_type, image_manifest = registry.manifest(subject.digest, MANIFESTS)
    config = json.loads(registry.blob(str(json.loads(image_manifest)["config"]["digest"])))
    recorded = ((config.get("config") or {}).get("Labels") or {}).get(facts.BOM)
    boms = [
        m for m in referrers(registry, subject.digest) if m.get("artifactType") == ARTIFACT_TYPE
    ]
    if not boms:
        raise UserError(
            f"{registry.repository}:{reference} ({subject.digest}) has no bill of materials "
            "beside it in the registry"
        )
    _media_type, body = registry.manifest(str(boms[-1]["digest"]), [OCI_MANIFEST])
    manifest = json.loads(body)
    if (manifest.get("subject") or {}).get("digest") != subject.digest:
        raise StepFailed(f"{registry.repository}: a referrer of {subject.digest} names another")
    (layer,) = manifest["layers"]
    document = registry.blob(str(layer["digest"]))
    if _digest(document) != layer["digest"]:
        raise StepFailed(f"{registry.repository}: the bill of materials' blob is not its digest")
    return materials.checked(document, recorded, f"{registry.repository}@{subject.digest}")


def materials_at(ref: str) -> materials.Materials:
    """The bill of materials beside REGISTRY/REPOSITORY[:TAG|@DIGEST] in its registry."""
    repository, reference = _split_reference(ref)
    return materials.parse(find(Registry(repository, auth_from_env()), reference), ref)


def _split_reference(ref: str) -> tuple[str, str]:
    if "@" in ref:
        repository, digest = ref.split("@", 1)
        return repository, digest
    return split_tag(ref)


def push_with_materials(
    engine: Engine | None,
    image: str,
    registry: str,
    report: Callable[[str], None] | None = None,
    on_transfer: OnTransfer | None = None,
) -> PushResult:
    """push_image, then the image's bill of materials beside it in the registry (an image built
    without one is pushed as it is, and said so). The document is checked against its label
    first: a changed one never reaches the registry."""
    note = report or (lambda _msg: None)
    engine = engine or open_engine()
    pushed = push_image(engine, image, registry, note, on_transfer)
    info = engine.inspect(image) or {}
    recorded = ((info.get("Config") or {}).get("Labels") or {}).get(facts.BOM)
    if recorded is None:
        note(f"{image} has no bill of materials (built by an earlier release): none beside it")
        return pushed
    document = materials.checked(
        engine.read_file(str(info["Id"]), facts.BOM_FILE), recorded, f"image {image}"
    )
    if not pushed.digest:
        raise StepFailed(f"pushed {pushed.remote}, but its digest is not known")
    repository, _tag = split_tag(pushed.remote)
    where = Registry(repository, auth_from_env())
    referrer = attach(where, subject_of(where, pushed.digest), document)
    note(f"its bill of materials beside it: {repository}@{referrer} ({ARTIFACT_TYPE})")
    return pushed
