"""`lock` pins a registry base by digest, for real: the digest comes from the local registry
through dockerd, the rendered FROM names it, the engine pulls exactly it, and when the tag moves
`lock --check` says so while the lock keeps building the old image."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from tests._json_records import result
from tests.e2e.sif_fixtures import cli, docker_client, import_image, shell_rootfs  # noqa: F401

pytestmark = pytest.mark.e2e

REPOSITORY = "127.0.0.1:5000/hvd-test/pin-base"
BASE = f"{REPOSITORY}:1"
MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
    ]
)


def publish(client: Any, marker: str) -> str:
    """An image (with `marker` inside, so each is another image) pushed as BASE; the digest the
    registry itself serves for the tag (asked over HTTP, not through the code under test)."""
    import_image(client, BASE, shell_rootfs(), {"marker": marker})
    for record in client.api.push(REPOSITORY, tag="1", stream=True, decode=True):
        assert "error" not in record, record
    reply = requests.head(
        "http://127.0.0.1:5000/v2/hvd-test/pin-base/manifests/1",
        headers={"Accept": MANIFEST_TYPES},
        timeout=30,
    )
    reply.raise_for_status()
    return reply.headers["Docker-Content-Digest"]


def test_lock_pins_the_registry_base_and_check_sees_the_tag_move(
    docker_client: Any,  # noqa: F811 (the fixture)
    local_registry: str,
    tmp_path: Path,
) -> None:
    first = publish(docker_client, "first")
    recipe = tmp_path / "pinned.yaml"
    recipe.write_text(
        f"name: pinned\nversion: '1'\nbase: {BASE}\n"
        "python: {version: '3.11', source: image}\npip: [six==1.16.0]\n"
    )
    done = cli("lock", str(recipe), "--json")
    assert done.returncode == 0, done.stderr
    assert result("lock", done.stdout)["base"] == {"image": BASE, "digest": first, "reason": ""}
    rendered = cli("render", str(recipe))
    assert rendered.returncode == 0, rendered.stderr
    assert f"FROM {BASE}@{first}\n" in rendered.stdout
    # the engine takes the tag@digest reference as FROM names it
    docker_client.images.remove(BASE, force=True)
    pulled = docker_client.images.pull(f"{BASE}@{first}")
    assert f"{REPOSITORY}@{first}" in pulled.attrs["RepoDigests"]

    second = publish(docker_client, "second")
    assert second != first
    check = cli("lock", str(recipe), "--check")
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"base {BASE} {first} -> {second}" in check.stdout
    assert f"FROM {BASE}@{first}\n" in cli("render", str(recipe)).stdout  # until re-locked
    # the recipe asks for what it was locked for: the lock is current until --upgrade
    assert cli("lock", str(recipe)).returncode == 0
    assert f"FROM {BASE}@{first}\n" in cli("render", str(recipe)).stdout
    assert cli("lock", str(recipe), "--upgrade").returncode == 0
    assert f"FROM {BASE}@{second}\n" in cli("render", str(recipe)).stdout
