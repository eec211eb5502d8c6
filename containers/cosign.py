"""Signatures of pushed images as cosign stores them (sigstore/cosign specs/SIGNATURE_SPEC.md),
made and checked with a key the user holds: no transparency log, no network service.

The image is signed by its manifest's digest: a "simple signing" payload naming that digest,
signed with ECDSA P-256 over SHA-256 (the scheme every implementation must support), stored in
the image's repository as a manifest at the tag `sha256-<hex>.sig` whose layers are the
payloads, each signature base64 in the layer's annotation `dev.cosignproject.cosign/signature`.
`cosign verify --key cosign.pub IMAGE` reads that; a check here reads the same.

A tag is resolved to a digest first, so a tag moved to another image finds that image's
signatures (none, or payloads naming another digest), never the first image's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:  # the build extra: a launch-only install signs and checks no registry image
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
except ModuleNotFoundError:
    ec = None  # type: ignore[assignment]

from hvd_container.containers.image_index import Registry
from hvd_container.containers.push import auth_from_env, split_tag
from hvd_container.containers.referrers import OCI_MANIFEST, subject_of

from hvd_container.core.errors import UserError, missing_build_extra

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE = "dev.cosignproject.cosign/signature"
PAYLOAD_TYPE = "cosign container image signature"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
PASSWORD_ENV = "COSIGN_PASSWORD"  # cosign's own name for a key's password
_MAX_KEY_BYTES = 64 << 10


@dataclass(frozen=True)
class Signed:
    """A signature put beside an image: the image, the tag that holds it, the key's digest."""

    image: str  # REPOSITORY@sha256:...
    tag: str  # REPOSITORY:sha256-<hex>.sig
    key: str  # the public key's fingerprint: sha256 of its DER form


@dataclass(frozen=True)
class ImageCheck:
    """A registry image's signatures against the trusted keys: the digest the reference
    resolved to, the keys (fingerprints) whose signatures held, and what refused it."""

    image: str  # REPOSITORY@sha256:...
    digest: str
    signers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    found: int = 0  # signatures stored beside the image

    @property
    def ok(self) -> bool:
        return bool(self.signers) and not self.problems


def _crypto() -> None:
    if ec is None:
        raise missing_build_extra("cryptography, which signs and checks registry images,")


def signature_tag(digest: str) -> str:
    """The tag of an image's signatures: `sha256:abc` -> `sha256-abc.sig`."""
    return digest.replace(":", "-", 1) + ".sig"


def payload(repository: str, digest: str) -> bytes:
    """The simple signing payload for the image at repository@digest, as cosign writes it."""
    document = {
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": None,
    }
    return json.dumps(document, separators=(",", ":")).encode()


def _read_key_file(path: Path, what: str) -> bytes:
    try:
        if path.stat().st_size > _MAX_KEY_BYTES:
            raise UserError(f"{path}: over 64 KiB, not a {what}")
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror or exc}") from None


def load_private_key(path: Path) -> Any:
    """An ECDSA P-256 private key from a PEM file (PKCS#8 or SEC 1; encrypted PKCS#8 takes its
    password from $COSIGN_PASSWORD)."""
    _crypto()
    data = _read_key_file(path, "private key")
    if b"ENCRYPTED SIGSTORE PRIVATE KEY" in data or b"ENCRYPTED COSIGN PRIVATE KEY" in data:
        raise UserError(
            f"{path}: cosign's own encrypted key format, which is read by cosign alone: sign "
            "with a PEM key (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 "
            "-out KEY.pem; `cosign import-key-pair --key KEY.pem` gives cosign the same key)"
        )
    password = os.environ.get(PASSWORD_ENV)
    try:
        key = serialization.load_pem_private_key(
            data, password.encode() if password and b"ENCRYPTED" in data else None
        )
    except (ValueError, TypeError) as exc:
        hint = f" (its password: ${PASSWORD_ENV})" if b"ENCRYPTED" in data else ""
        raise UserError(f"{path}: not a PEM private key{hint}: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise UserError(f"{path}: not an ECDSA P-256 key (the scheme cosign signatures use)")
    return key


def load_public_key(path: Path) -> Any:
    _crypto()
    data = _read_key_file(path, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as exc:
        raise UserError(f"{path}: not a PEM public key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise UserError(f"{path}: not an ECDSA P-256 public key (the scheme cosign uses)")
    return key


def fingerprint(public_key: Any) -> str:
    """The key's fingerprint: sha256 of its DER SubjectPublicKeyInfo, hex."""
    _crypto()
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def split_reference(ref: str) -> tuple[str, str]:
    """(repository, tag or digest) of REPOSITORY[:TAG|@DIGEST]."""
    if "@" in ref:
        repository, digest = ref.split("@", 1)
        return repository, digest
    return split_tag(ref)


def _signature_manifest(layers: list[dict[str, Any]]) -> tuple[bytes, bytes]:
    """(config, manifest) of the signature image: the payloads as layers, as cosign's are."""
    config = {
        "architecture": "",
        "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": [layer["digest"] for layer in layers]},
        "config": {},
    }
    config_bytes = json.dumps(config, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": OCI_CONFIG,
            "size": len(config_bytes),
            "digest": _digest(config_bytes),
        },
        "layers": layers,
    }
    return config_bytes, json.dumps(manifest, separators=(",", ":")).encode()


def _stored_layers(registry: Registry, tag: str) -> list[dict[str, Any]]:
    found = registry.find_manifest(tag, [OCI_MANIFEST])
    if found is None:
        return []
    try:
        layers = json.loads(found[1]).get("layers") or []
    except (ValueError, AttributeError):
        return []
    return [layer for layer in layers if isinstance(layer, dict)]


def sign_image(ref: str, key_file: Path) -> Signed:
    """Sign the image at ref (its tag resolved to the digest the registry serves now) with the
    key in key_file; the signature joins any already beside it."""
    _crypto()
    key = load_private_key(key_file)
    repository, reference = split_reference(ref)
    registry = Registry(repository, auth_from_env())
    digest = subject_of(registry, reference).digest
    document = payload(repository, digest)
    signature = key.sign(document, ec.ECDSA(hashes.SHA256()))
    encoded = base64.b64encode(signature).decode()
    layer: dict[str, Any] = {
        "mediaType": SIMPLE_SIGNING,
        "size": len(document),
        "digest": _digest(document),
        "annotations": {SIGNATURE: encoded},
    }
    tag = signature_tag(digest)
    kept = [  # the signatures already there, this one once
        old
        for old in _stored_layers(registry, tag)
        if old.get("digest") != layer["digest"]
        or (old.get("annotations") or {}).get(SIGNATURE) != encoded
    ]
    layers = [*kept, layer]
    config, manifest = _signature_manifest(layers)
    registry.put_blob(document)
    registry.put_blob(config)
    registry.put_manifest(tag, manifest, OCI_MANIFEST)
    return Signed(f"{repository}@{digest}", f"{repository}:{tag}", fingerprint(key.public_key()))


def _verifies(public_key: Any, document: bytes, signature: bytes) -> bool:
    _crypto()
    try:
        public_key.verify(signature, document, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


@dataclass(frozen=True)
class Stored:
    """One signature as the registry holds it: its layer's descriptor and the payload's bytes."""

    layer: dict[str, Any]
    payload: bytes


def _signer(stored: Stored, digest: str, keys: Sequence[Any]) -> tuple[str | None, str | None]:
    """(the fingerprint of the trusted key that made this signature, or why it is refused)."""
    layer, document = stored.layer, stored.payload
    name = f"payload {layer.get('digest')}"
    if _digest(document) != layer.get("digest"):
        return None, f"{name}: the registry's blob is not its digest"
    try:
        critical = json.loads(document)["critical"]
        signed_digest = critical["image"]["docker-manifest-digest"]
        kind = critical["type"]
    except (ValueError, KeyError, TypeError):
        return None, f"{name}: not a simple signing payload"
    if kind != PAYLOAD_TYPE:
        return None, f"{name}: of type {kind!r}, not {PAYLOAD_TYPE!r}"
    if signed_digest != digest:
        return None, f"a signature of {signed_digest}, not of this image ({digest})"
    try:
        annotations = layer.get("annotations") or {}
        signature = base64.b64decode(str(annotations.get(SIGNATURE)), validate=True)
    except ValueError:
        return None, f"{name}: its signature is not base64"
    for key in keys:
        if _verifies(key, document, signature):
            return fingerprint(key), None
    return None, "a signature made by none of the trusted keys"


def verdict(image: str, digest: str, stored: Sequence[Stored], keys: Sequence[Any]) -> ImageCheck:
    """The image's verdict from the signatures stored beside it. One trusted signature that
    names this digest is enough (cosign verify's rule); the others are named only when none
    held, so that a stale signature beside a good one does not refuse the image."""
    if not stored:
        return ImageCheck(
            image, digest, problems=[f"not signed (nothing at {signature_tag(digest)})"]
        )
    if not keys:
        return ImageCheck(image, digest, found=len(stored))
    signers: list[str] = []
    refusals: list[str] = []
    for one in stored:
        signer, why = _signer(one, digest, keys)
        if signer:
            signers.append(signer)
        elif why:
            refusals.append(why)
    problems = [] if signers else list(dict.fromkeys(refusals))
    return ImageCheck(image, digest, list(dict.fromkeys(signers)), problems, len(stored))


def check_image(ref: str, key_files: Sequence[Path]) -> ImageCheck:
    """The signatures beside the image ref names now (a tag resolved to its digest first)
    against the PEM public keys in key_files."""
    keys = [load_public_key(path) for path in key_files]
    repository, reference = split_reference(ref)
    registry = Registry(repository, auth_from_env())
    digest = subject_of(registry, reference).digest
    image = f"{repository}@{digest}"
    if reference.startswith("sha256:") and reference != digest:
        return ImageCheck(image, digest, problems=[f"{reference}: the registry serves {digest}"])
    layers = [
        layer
        for layer in _stored_layers(registry, signature_tag(digest))
        if layer.get("mediaType") == SIMPLE_SIGNING
    ]
    stored = [Stored(layer, registry.blob(str(layer.get("digest")))) for layer in layers]
    return verdict(image, digest, stored, keys)
