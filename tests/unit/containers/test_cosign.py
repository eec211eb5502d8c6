"""A pushed image's signature as cosign stores it (sigstore/cosign specs/SIGNATURE_SPEC.md):
the simple signing payload, the tag beside the digest, the keys read, and the verdict on what
a registry holds, with openssl as the other side of each signature. The round trip through the
distribution registry is tests/e2e/test_image_signatures.py."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hvd_container.containers import cosign

from hvd_container.core.errors import UserError

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
REPOSITORY = "registry.example/team/cpu-bookworm"


def new_key(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """(private, public) PEM files of a new P-256 key made by openssl, as a user makes one."""
    private, public = tmp_path / f"{name}.pem", tmp_path / f"{name}.pub"
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-out", str(private)],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        ["openssl", "pkey", "-in", str(private), "-pubout", "-out", str(public)],
        check=True, capture_output=True,
    )  # fmt: skip
    return private, public


def stored(document: bytes, signature: bytes) -> cosign.Stored:
    layer = {
        "mediaType": cosign.SIMPLE_SIGNING,
        "size": len(document),
        "digest": "sha256:" + hashlib.sha256(document).hexdigest(),
        "annotations": {cosign.SIGNATURE: base64.b64encode(signature).decode()},
    }
    return cosign.Stored(layer, document)


def signed(key_file: Path, document: bytes) -> bytes:
    key: Any = cosign.load_private_key(key_file)
    return bytes(key.sign(document, ec.ECDSA(hashes.SHA256())))


def test_the_payload_is_the_specs_simple_signing_form() -> None:
    assert json.loads(cosign.payload(REPOSITORY, DIGEST)) == {
        "critical": {
            "identity": {"docker-reference": REPOSITORY},
            "image": {"docker-manifest-digest": DIGEST},
            "type": "cosign container image signature",
        },
        "optional": None,
    }
    # the bytes as Go's json.Marshal writes them in cosign: no spaces between tokens
    assert cosign.payload("r.example/x", DIGEST) == (
        b'{"critical":{"identity":{"docker-reference":"r.example/x"},"image":'
        b'{"docker-manifest-digest":"' + DIGEST.encode() + b'"},'
        b'"type":"cosign container image signature"},"optional":null}'
    )
    assert cosign.signature_tag(DIGEST) == "sha256-" + "ab" * 32 + ".sig"


def test_what_it_signs_openssl_verifies_and_what_openssl_signs_it_accepts(tmp_path: Path) -> None:
    private, public = new_key(tmp_path, "k")
    document = cosign.payload(REPOSITORY, DIGEST)
    (tmp_path / "payload").write_bytes(document)
    (tmp_path / "sig").write_bytes(signed(private, document))
    verified = subprocess.run(
        ["openssl", "dgst", "-sha256", "-verify", str(public), "-signature",
         str(tmp_path / "sig"), str(tmp_path / "payload")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert verified.returncode == 0 and verified.stdout.strip() == "Verified OK"
    by_openssl = subprocess.run(
        ["openssl", "dgst", "-sha256", "-sign", str(private), str(tmp_path / "payload")],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    key = cosign.load_public_key(public)
    found = cosign.verdict(f"{REPOSITORY}@{DIGEST}", DIGEST, [stored(document, by_openssl)], [key])
    assert found.ok and found.signers == [cosign.fingerprint(key)]
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-in", str(public), "-outform", "DER"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    assert cosign.fingerprint(key) == hashlib.sha256(der).hexdigest()


def test_each_tampering_is_refused_with_its_reason(tmp_path: Path) -> None:
    private, public = new_key(tmp_path, "k")
    stranger, _ = new_key(tmp_path, "stranger")
    key = cosign.load_public_key(public)
    image = f"{REPOSITORY}@{DIGEST}"
    document = cosign.payload(REPOSITORY, DIGEST)

    def refusal(*held: cosign.Stored) -> list[str]:
        found = cosign.verdict(image, DIGEST, held, [key])
        assert not found.ok
        return found.problems

    assert refusal() == [f"not signed (nothing at {cosign.signature_tag(DIGEST)})"]
    assert refusal(stored(document, signed(stranger, document))) == [
        "a signature made by none of the trusted keys"
    ]
    other = cosign.payload(REPOSITORY, OTHER)  # another image's signature copied beside this
    assert refusal(stored(other, signed(private, other))) == [
        f"a signature of {OTHER}, not of this image ({DIGEST})"
    ]
    good = stored(document, signed(private, document))
    changed = cosign.Stored(good.layer, document.replace(b"cosign", b"cosigN"))
    assert refusal(changed) == [
        f"payload {good.layer['digest']}: the registry's blob is not its digest"
    ]
    forged = stored(document, b"")
    forged.layer["annotations"][cosign.SIGNATURE] = "not base64!"
    assert refusal(forged) == [f"payload {forged.layer['digest']}: its signature is not base64"]
    # one trusted signature of this digest is enough, as for cosign verify
    both = cosign.verdict(
        image, DIGEST, [stored(document, signed(stranger, document)), good], [key]
    )
    assert both.ok and both.found == 2


def test_keys_that_cannot_sign_are_one_line_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = tmp_path / "cosign.key"
    own.write_text(
        "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\neyJrZGYiOnt9fQ==\n"
        "-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"
    )
    with pytest.raises(UserError, match=r"cosign's own encrypted key format.*openssl genpkey"):
        cosign.load_private_key(own)
    rsa_key = tmp_path / "rsa.pem"
    rsa_key.write_bytes(
        rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(UserError, match=r"rsa\.pem: not an ECDSA P-256 key"):
        cosign.load_private_key(rsa_key)
    locked = tmp_path / "locked.pem"
    locked.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"s3cret"),
        )
    )
    monkeypatch.delenv(cosign.PASSWORD_ENV, raising=False)
    with pytest.raises(
        UserError, match=r"locked\.pem: not a PEM private key \(its password: \$COSIGN_PASSWORD\)"
    ):
        cosign.load_private_key(locked)
    monkeypatch.setenv(cosign.PASSWORD_ENV, "s3cret")
    assert cosign.load_private_key(locked).curve.name == "secp256r1"
    with pytest.raises(UserError, match=r"missing\.pem: No such file"):
        cosign.load_private_key(tmp_path / "missing.pem")
    with pytest.raises(UserError, match=r"rsa\.pem: not a PEM public key"):
        cosign.load_public_key(rsa_key)
