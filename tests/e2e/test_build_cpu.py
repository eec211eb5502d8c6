"""The CPU recipe built end to end through the real Docker engine, verified, run and pushed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from build_fixtures import CPU_RECIPE, hvd, with_cpu_lock
from hvd_container.containers.build import BUILD_DIGEST_LABEL, engine_build_digest
from hvd_container.containers.engine.docker_api import DockerEngine
from hvd_container.containers.push import MANIFEST_V2
from hvd_container.containers.recipe_loader import load_recipe
from hvd_container.containers.render import docker_build

pytestmark = pytest.mark.e2e

ALLREDUCE = """\
import torch
import horovod.torch as hvd
hvd.init()
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
print(f"rank {hvd.rank()} of {hvd.size()}: sum {total.item():g}", flush=True)
"""


def run_in(api: Any, image: str, argv: list[str], mount: Path | None = None) -> tuple[int, str]:
    host_config = api.create_host_config(
        binds={str(mount): {"bind": "/job", "mode": "ro"}} if mount else None, shm_size="256m"
    )
    cid = api.create_container(image, command=argv, host_config=host_config)["Id"]
    try:
        api.start(cid)
        code = api.wait(cid, timeout=600)["StatusCode"]
        return code, api.logs(cid).decode(errors="replace")
    finally:
        api.remove_container(cid, force=True)


def test_cpu_image_is_verified_and_labelled(api: Any, cpu_image: str) -> None:
    labels = api.inspect_image(cpu_image)["Config"]["Labels"]
    p = "org.hvd-container."
    assert labels[p + "verified"] == "true"
    assert labels[p + "horovod.frameworks"] == "pytorch"
    assert labels[p + "horovod.controllers"] == "gloo,mpi"
    assert labels[p + "horovod.tensor_ops"] == "gloo,mpi"
    assert labels[p + "versions.torch"].startswith("2.13.0")
    assert labels[p + "versions.horovod"] == "0.28.1"
    assert labels[p + "versions.python"].startswith("3.11.")
    assert labels[p + "versions.mpi"].startswith("4.1")
    assert labels[p + "arch"] == "amd64"
    recipe = load_recipe(CPU_RECIPE)
    assert labels[p + "recipe.digest"] == recipe.digest()
    # the digest covers the rendered context and the base image's ID in the engine
    assert labels[BUILD_DIGEST_LABEL] == engine_build_digest(
        DockerEngine(api), docker_build(recipe)
    )


def test_the_image_holds_its_bill_of_materials(api: Any, cpu_image: str) -> None:
    """The CycloneDX document inside the image: valid on CycloneDX's schema, the label's digest
    its own, and its Debian packages exactly what dpkg-query (not the tool's reader) lists."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    from hvd_container.containers.bom import BOM_FILE
    from hvd_container.containers.build import BOM_LABEL

    code, text = run_in(api, cpu_image, ["cat", BOM_FILE])
    assert code == 0, text
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    labels = api.inspect_image(cpu_image)["Config"]["Labels"]
    assert labels[BOM_LABEL] == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    parts = json.loads(text)["components"]
    code, listed = run_in(
        api, cpu_image, ["dpkg-query", "-W", "-f", "${db:Status-Status} ${Package} ${Version}\n"]
    )
    assert code == 0, listed
    installed = {
        tuple(line.split()[1:]) for line in listed.splitlines() if line.startswith("installed ")
    }
    debs = {(c["name"], c["version"]) for c in parts if c.get("purl", "").startswith("pkg:deb/")}
    assert debs == installed and len(debs) > 50
    pip = {c["name"]: c for c in parts if c.get("purl", "").startswith("pkg:pypi/")}
    assert pip["torch"]["version"] == labels["org.hvd-container.versions.torch"]
    assert pip["torch"]["hashes"] and pip["horovod"]["pedigree"]["patches"]
    assert {c["name"] for c in parts if c["type"] == "container"} == {"hvd-base/debian:bookworm"}


def test_no_ca_bundle_or_pip_config_left_in_the_image(api: Any, cpu_image: str) -> None:
    code, out = run_in(
        api,
        cpu_image,
        [
            "sh",
            "-c",
            "ls /etc/pip.conf /root/.config/pip 2>/dev/null; "
            "env | grep -E 'PIP_CERT|PIP_CONFIG|HVD_PIP' || true; "
            "find / -xdev -name 'ca.pem' -path '/tmp/*' 2>/dev/null",
        ],
    )
    assert code == 0 and out.strip() == ""


def test_second_build_is_a_cache_hit_under_10_seconds(cpu_image: str) -> None:
    start = time.monotonic()
    proc = hvd("build", CPU_RECIPE, "--progress", "plain")
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert "is up to date" in proc.stdout
    assert elapsed < 10


def test_verify_command_rechecks_the_image(cpu_image: str) -> None:
    proc = hvd("verify", cpu_image, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"] is True
    assert result["facts"]["org.hvd-container.horovod.controllers"] == "gloo,mpi"


@pytest.mark.parametrize(
    "launcher",
    [
        ["horovodrun", "--gloo", "-np", "2", "-H", "localhost:2"],
        ["mpirun", "--allow-run-as-root", "-np", "2", "--oversubscribe"],
    ],
    ids=["horovodrun-gloo", "mpirun"],
)
def test_two_rank_allreduce_in_the_image(
    api: Any, cpu_image: str, tmp_path: Path, launcher: list[str]
) -> None:
    (tmp_path / "allreduce.py").write_text(ALLREDUCE)
    code, out = run_in(api, cpu_image, [*launcher, "python", "/job/allreduce.py"], tmp_path)
    assert code == 0, out
    # horovodrun prefixes lines with "[rank]<stdout>:", mpirun does not.
    results = sorted(re.findall(r"rank (\d of \d: sum \d+)$", out, re.M))
    assert results == ["0 of 2: sum 3", "1 of 2: sum 3"], out


def test_push_to_local_registry_and_read_manifest(
    cpu_image: str, local_registry: str, tmp_path: Path
) -> None:
    """Pushed, read back over HTTP, and signed by the digest the registry gave back (--sign):
    the signature holds against the key's public half and no other."""
    from tests._json_records import result as json_result

    key, public, other = tmp_path / "k.pem", tmp_path / "k.pub", tmp_path / "other.pub"
    for made, name in ((key, public), (tmp_path / "other.pem", other)):
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-out", str(made)], check=True)  # fmt: skip
        subprocess.run(["openssl", "pkey", "-in", str(made), "-pubout", "-out", str(name)],
                       check=True)  # fmt: skip
    proc = hvd("push", CPU_RECIPE, "--registry", local_registry, "--sign", str(key), "--json")
    assert proc.returncode == 0, proc.stderr
    # every line checked against its schema (layer bytes show only for layers not yet there)
    result = json_result("push", proc.stdout)
    name, tag = cpu_image.split(":")
    assert result["remote"] == f"{local_registry}/{name}:{tag}"
    resp = requests.get(
        f"http://{local_registry}/v2/{name}/manifests/{tag}",
        headers={"Accept": MANIFEST_V2},
        timeout=30,
    )
    assert resp.status_code == 200
    manifest = resp.json()
    assert manifest["mediaType"] == MANIFEST_V2 and len(manifest["layers"]) > 3
    assert resp.headers["Docker-Content-Digest"] == result["digest"]
    assert result["signature"] == (
        f"{local_registry}/{name}:{result['digest'].replace(':', '-')}.sig"
    )
    pinned = f"{local_registry}/{name}@{result['digest']}"
    assert hvd("inspect", pinned, "--signatures", "--keyring", str(public)).returncode == 0
    assert hvd("inspect", pinned, "--signatures", "--keyring", str(other)).returncode == 1


def test_a_pushed_image_has_its_bill_of_materials_beside_it(
    api: Any, cpu_image: str, local_registry: str
) -> None:
    """Read back with plain HTTP as the OCI distribution spec has it (not the tool's client):
    the referrers tag of the pushed digest lists a CycloneDX artifact whose subject is the
    image and whose layer is the image's own document. A referrer someone else put there with
    another document is refused by `inspect --sbom`."""
    from hvd_container.containers import referrers
    from hvd_container.containers.bom import BOM_FILE

    namespace = f"bom{time.time_ns() % 10**9}"
    proc = hvd("push", cpu_image, "--registry", f"{local_registry}/{namespace}", "--json")
    assert proc.returncode == 0, proc.stderr
    pushed = json.loads(proc.stdout.strip().splitlines()[-1])
    name = f"{namespace}/{cpu_image.split(':')[0]}"
    base = f"http://{local_registry}/v2/{name}"
    index = requests.get(
        f"{base}/manifests/{pushed['digest'].replace(':', '-')}",
        headers={"Accept": referrers.INDEX},
        timeout=30,
    ).json()
    (entry,) = index["manifests"]
    assert entry["artifactType"] == "application/vnd.cyclonedx+json"
    manifest = requests.get(
        f"{base}/manifests/{entry['digest']}",
        headers={"Accept": referrers.OCI_MANIFEST},
        timeout=30,
    ).json()
    assert manifest["subject"]["digest"] == pushed["digest"]
    document = requests.get(f"{base}/blobs/{manifest['layers'][0]['digest']}", timeout=30).content
    code, in_image = run_in(api, cpu_image, ["cat", BOM_FILE])
    assert code == 0 and document == in_image.encode()
    shown = hvd("inspect", f"{local_registry}/{name}@{pushed['digest']}", "--sbom", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["bom"] == json.loads(document)
    # someone puts another document beside the image: refused, it is not this image's
    registry = referrers.Registry(f"{local_registry}/{name}", None)
    subject = referrers.subject_of(registry, pushed["digest"])
    referrers.attach(registry, subject, document.replace(b"libc6", b"libc7"))
    refused = hvd("inspect", f"{local_registry}/{name}@{pushed['digest']}", "--sbom")
    assert refused.returncode != 0 and "does not match its label" in refused.stderr, refused.stderr


def test_verify_image_of_a_recipe_file_uses_its_labels(
    api: Any, cpu_image: str, tmp_path: Path
) -> None:
    recipe = tmp_path / "hvd-test-file.yaml"
    recipe.write_text(f"extends: {CPU_RECIPE}\nname: hvd-test-file\nchecks:\n  - 'true'\n")
    with_cpu_lock(recipe)
    for cid in _containers_of(api, "hvd-test-file:1"):  # a killed earlier run's: the image
        api.remove_container(cid, force=True)  # ids are the same from build to build
    try:
        proc = hvd("build", str(recipe), "--progress", "plain")
        assert proc.returncode == 0, proc.stderr
        proc = hvd("verify", "hvd-test-file:1")
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0] == (
            "hvd-test-file:1: recipe hvd-test-file is not built in; "
            "verifying against the facts recorded in its labels"
        )
        assert lines[-1] == "hvd-test-file:1: verified against the facts recorded in its labels"
        # the throw-away containers of both verifications are gone
        assert _containers_of(api, "hvd-test-file:1") == []
    finally:
        import docker.errors

        for cid in _containers_of(api, "hvd-test-file:1"):
            api.remove_container(cid, force=True)
        with contextlib.suppress(docker.errors.ImageNotFound):
            api.remove_image("hvd-test-file:1")


def _containers_of(api: Any, image: str) -> list[str]:
    import docker.errors

    try:
        return [c["Id"] for c in api.containers(all=True, filters={"ancestor": image})]
    except docker.errors.NotFound:  # no such image (yet)
        return []
