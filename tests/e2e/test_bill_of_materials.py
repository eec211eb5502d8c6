"""One bill of materials from image to registry to SIF for the other built-in CPU recipe that
`.ci/run` builds, cpu-bookworm-torch (cpu-bookworm's are held in test_build_cpu.py and
test_convert_cpu.py): inside the image, valid on CycloneDX's schema and its label's digest;
beside it in the registry after a signed push, the same bytes; inside its SIF, the same bytes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._json_records import result
from tests.e2e.sif_fixtures import cli, docker_client, file_in_image  # noqa: F401 (fixtures)
from tests.e2e.slurm_fixtures import torch_sif  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e


def test_the_torch_image_carries_one_bill_of_materials_to_the_registry_and_its_sif(
    docker_client: Any,  # noqa: F811
    torch_image: str,
    torch_sif: Path,  # noqa: F811
    local_registry: str,
    tmp_path: Path,
) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    from hvd_container import facts

    in_image = file_in_image(torch_image, facts.BOM_FILE)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(in_image.decode()) is None
    labels = docker_client.images.get(torch_image).labels
    assert labels[facts.BOM] == facts.bom_digest(in_image)
    document = json.loads(in_image)
    pip = {c["name"] for c in document["components"] if c.get("purl", "").startswith("pkg:pypi/")}
    assert "torch" in pip and "horovod" not in pip

    key, public = tmp_path / "k.pem", tmp_path / "k.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-out", str(key)], check=True)  # fmt: skip
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(public)],
                   check=True)  # fmt: skip
    registry = f"{local_registry}/bomtorch"
    pushed = cli("push", torch_image, "--registry", registry, "--sign", str(key), "--json")
    assert pushed.returncode == 0, pushed.stderr
    record = result("push", pushed.stdout)
    remote = f"{registry}/{torch_image.split(':')[0]}@{record['digest']}"
    beside = cli("inspect", remote, "--sbom", "--json")
    assert beside.returncode == 0, beside.stderr
    assert json.loads(beside.stdout)["bom"] == document
    signed = cli("inspect", remote, "--signatures", "--keyring", str(public))
    assert signed.returncode == 0, signed.stderr

    in_sif = cli("inspect", str(torch_sif), "--sbom", "--json")
    assert in_sif.returncode == 0, in_sif.stderr
    assert json.loads(in_sif.stdout)["bom"] == document
