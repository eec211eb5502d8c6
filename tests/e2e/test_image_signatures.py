"""A pushed image's signature, for real: `sign` stores it in the local registry as cosign does
(sigstore/cosign specs/SIGNATURE_SPEC.md), openssl verifies what the registry then serves (read
over HTTP, not through the code under test), a signature openssl made and the test stored is
accepted, and a tag moved to another image, a signature copied beside it and a key nobody
trusts are each refused, by `inspect --signatures` and before a batch job is written."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import requests

from tests._json_records import result
from tests.e2e.podman_hpc_fixtures import podman_hpc_cmd
from tests.e2e.sif_fixtures import (  # noqa: F401 (fixtures)
    cli,
    docker_client,
    import_image,
    run_testbed,
    shell_rootfs,
)

pytestmark = pytest.mark.e2e

API = "http://127.0.0.1:5000/v2/hvd-test/signed"
REPOSITORY = "127.0.0.1:5000/hvd-test/signed"
IMAGE = f"{REPOSITORY}:1"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE = "dev.cosignproject.cosign/signature"
MANIFEST_TYPES = f"application/vnd.docker.distribution.manifest.v2+json, {OCI_MANIFEST}"


def publish(client: Any, marker: str) -> str:
    """An image (`marker` inside makes each another) pushed as IMAGE; the digest the registry
    serves for the tag, asked over HTTP."""
    import_image(client, IMAGE, shell_rootfs(), {"marker": marker})
    for record in client.api.push(REPOSITORY, tag="1", stream=True, decode=True):
        assert "error" not in record, record
    reply = requests.head(f"{API}/manifests/1", headers={"Accept": MANIFEST_TYPES}, timeout=30)
    reply.raise_for_status()
    return str(reply.headers["Docker-Content-Digest"])


def openssl(*args: str) -> bytes:
    return subprocess.run(["openssl", *args], capture_output=True, check=True).stdout


def new_key(where: Path, name: str) -> tuple[Path, Path]:
    """(private, public) PEM files of a P-256 key made by openssl."""
    private, public = where / f"{name}.pem", where / f"{name}.pub"
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(private))  # fmt: skip
    openssl("pkey", "-in", str(private), "-pubout", "-out", str(public))
    return private, public


def sig_tag(digest: str) -> str:
    return digest.replace(":", "-") + ".sig"


def put_blob(data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    start = requests.post(f"{API}/blobs/uploads/", timeout=30)
    assert start.status_code == 202, start.text
    location = start.headers["Location"]
    location = location if location.startswith("http") else f"http://127.0.0.1:5000{location}"
    joined = "&" if "?" in location else "?"
    done = requests.put(f"{location}{joined}digest={digest}", data=data, timeout=30)
    assert done.status_code == 201, done.text
    return digest


def store_signature(digest: str, payload: bytes, signature: bytes) -> None:
    """A signature manifest as the spec lays it out, put at the digest's tag by the test."""
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": []}, "config": {}}).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "size": len(config),
            "digest": put_blob(config),
        },
        "layers": [
            {
                "mediaType": SIMPLE_SIGNING,
                "size": len(payload),
                "digest": put_blob(payload),
                "annotations": {SIGNATURE: base64.b64encode(signature).decode()},
            }
        ],
    }
    reply = requests.put(
        f"{API}/manifests/{sig_tag(digest)}",
        data=json.dumps(manifest).encode(),
        headers={"Content-Type": OCI_MANIFEST},
        timeout=30,
    )
    assert reply.status_code == 201, reply.text


def stored_signature(digest: str) -> tuple[bytes, bytes]:
    """(payload, signature) of the one signature beside digest, read over HTTP."""
    reply = requests.get(
        f"{API}/manifests/{sig_tag(digest)}", headers={"Accept": OCI_MANIFEST}, timeout=30
    )
    reply.raise_for_status()
    (layer,) = reply.json()["layers"]
    assert layer["mediaType"] == SIMPLE_SIGNING
    payload = requests.get(f"{API}/blobs/{layer['digest']}", timeout=30).content
    assert "sha256:" + hashlib.sha256(payload).hexdigest() == layer["digest"]
    return payload, base64.b64decode(layer["annotations"][SIGNATURE])


def test_signatures_of_a_pushed_image_hold_both_ways_with_openssl_and_a_moved_tag_is_refused(
    docker_client: Any,  # noqa: F811 (the fixture)
    local_registry: str,
    tmp_path: Path,
) -> None:
    first = publish(docker_client, "first")
    mine, mine_pub = new_key(tmp_path, "mine")
    theirs, theirs_pub = new_key(tmp_path, "theirs")

    done = cli("sign", IMAGE, "--key", str(mine), "--json")
    assert done.returncode == 0, done.stderr
    assert result("sign", done.stdout)["image"]["image"] == f"{REPOSITORY}@{first}"
    payload, signature = stored_signature(first)
    critical = json.loads(payload)["critical"]
    assert critical["image"] == {"docker-manifest-digest": first}
    assert critical["type"] == "cosign container image signature"
    (tmp_path / "payload").write_bytes(payload)
    (tmp_path / "signature").write_bytes(signature)
    checked = openssl("dgst", "-sha256", "-verify", str(mine_pub), "-signature",
                      str(tmp_path / "signature"), str(tmp_path / "payload"))  # fmt: skip
    assert checked == b"Verified OK\n"

    # the other way: openssl signs, the test stores it; only that key is trusted then
    store_signature(first, payload, openssl("dgst", "-sha256", "-sign", str(theirs), str(tmp_path / "payload")))  # fmt: skip
    theirs_held = cli("inspect", IMAGE, "--signatures", "--keyring", str(theirs_pub), "--json")
    assert theirs_held.returncode == 0, theirs_held.stderr
    der = openssl("pkey", "-pubin", "-in", str(theirs_pub), "-outform", "DER")
    assert result("inspect", theirs_held.stdout)["signers"] == [hashlib.sha256(der).hexdigest()]
    stranger = cli("inspect", IMAGE, "--signatures", "--keyring", str(mine_pub))
    assert stranger.returncode == 1
    assert stranger.stderr == (
        f"hvd-container: error: {REPOSITORY}@{first}: a signature made by none of the trusted "
        "keys\n"
    )

    profile = tmp_path / "local-signed.yaml"
    profile.write_text(
        "extends: local\nname: local-signed\n"
        f"images:\n  signatures:\n    required: true\n    keys: [{theirs_pub}]\n"
    )
    launch = ["--site", str(profile), "--runtime", "podman-hpc", "-N", "1", "sh", "-c", "true"]
    script = cli("batch", "--image", IMAGE, *launch)
    assert script.returncode == 0, script.stderr
    # the job runs the digest that was checked, not the tag, which may move while it waits;
    # the real podman-hpc runs an image so named from its squashed store
    assert f" {REPOSITORY}@{first} " in script.stdout and f" {IMAGE} " not in script.stdout
    run_testbed("podman-hpc.sh", "up")
    assert podman_hpc_cmd("pull", IMAGE).returncode == 0
    ran = podman_hpc_cmd("run", "--rm", f"{REPOSITORY}@{first}", "sh", "-c", "true")
    assert ran.returncode == 0 and ran.stdout.startswith("[hello world]"), ran.stdout + ran.stderr

    # the tag moved to another image: its signatures are looked for, and there are none
    second = publish(docker_client, "second")
    assert second != first
    moved = cli("inspect", IMAGE, "--signatures", "--keyring", str(theirs_pub))
    assert moved.returncode == 1
    assert f"{REPOSITORY}@{second}: not signed (nothing at {sig_tag(second)})" in moved.stderr
    refused = cli("batch", "--image", IMAGE, *launch)
    assert refused.returncode == 2
    assert f"not signed (nothing at {sig_tag(second)})" in refused.stderr
    assert "site local-signed requires a signed image" in refused.stderr
    # the first image's signature copied beside the second names the first
    payload, signature = stored_signature(first)
    store_signature(second, payload, signature)
    copied = cli("inspect", IMAGE, "--signatures", "--keyring", str(theirs_pub))
    assert copied.returncode == 1
    assert f"a signature of {first}, not of this image ({second})" in copied.stderr
    # named by its digest, the first image is still the signed one
    pinned = f"{REPOSITORY}@{first}"
    assert cli("inspect", pinned, "--signatures", "--keyring", str(theirs_pub)).returncode == 0
    assert cli("batch", "--image", pinned, *launch).returncode == 0
