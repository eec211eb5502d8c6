"""The referrer's manifest as the OCI image spec 1.1 describes an artifact (the empty config,
the artifact type, the subject), the fallback tag, and which references are read from a
registry; the real round trip through the distribution registry is tests/e2e/test_build_cpu.py."""

from __future__ import annotations

import hashlib
import json

from hvd_container.containers import materials
from hvd_container.containers.referrers import (
    ARTIFACT_TYPE,
    EMPTY,
    Subject,
    artifact_manifest,
    fallback_tag,
)

SUBJECT = Subject(
    "application/vnd.docker.distribution.manifest.v2+json", "sha256:" + "ab" * 32, 529
)


def test_the_artifact_names_its_subject_and_holds_the_document() -> None:
    document = b'{"bomFormat": "CycloneDX", "components": []}'
    manifest = json.loads(artifact_manifest(SUBJECT, document))
    assert manifest["schemaVersion"] == 2 and manifest["artifactType"] == ARTIFACT_TYPE
    assert manifest["config"] == {
        "mediaType": EMPTY,
        "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
        "size": 2,
    }  # the spec's own example of the empty descriptor
    (layer,) = manifest["layers"]
    assert layer["digest"] == "sha256:" + hashlib.sha256(document).hexdigest()
    assert layer["size"] == len(document) and manifest["subject"] == SUBJECT.descriptor()


def test_the_fallback_tag_is_the_digest_with_a_dash() -> None:
    assert fallback_tag("sha256:" + "ab" * 32) == "sha256-" + "ab" * 32


def test_a_reference_that_names_a_registry_is_read_from_it() -> None:
    asked: list[str] = []

    def remote(ref: str) -> materials.Materials:
        asked.append(ref)
        return materials.Materials(ref, {}, ())

    def no_engine() -> object:
        raise AssertionError("the engine was opened")

    for ref in ("r.example/team/x:1", "localhost:5000/x@sha256:" + "ab" * 32):
        materials.read(ref, no_engine, remote)  # type: ignore[arg-type]
    assert asked == ["r.example/team/x:1", "localhost:5000/x@sha256:" + "ab" * 32]
