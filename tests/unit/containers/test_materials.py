"""The bill of materials read back: from a SIF made by the project's writer (an SBOM object,
CycloneDX JSON), from an image in the FAKE protocol-level engine, checked against the label's
digest; `inspect --sbom` and `inspect --diff` on them; a changed document refused."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from _fakes import BASE, FakeEngine
from hvd_container.containers import materials
from hvd_container.containers.bom import bill_of_materials, installed_debs
from hvd_container.containers.convert.sif_native import image_bom, sif_labels
from hvd_container.containers.recipe_loader import load_recipe
from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.layout import sif_prefix
from hvd_container.containers.sif.metadata import ImageConfig
from hvd_container.containers.sif.reader import read_sif
from hvd_container.containers.sif.writer import sif_objects

from hvd_container import facts
from hvd_container.cli.app import main
from hvd_container.core.errors import StepFailed, UserError

DEBS = "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: {}\n"


def document(libc: str = "2.36-9+deb12u13", nccl: str | None = None) -> bytes:
    versions = {"nccl": nccl} if nccl else {}
    text = bill_of_materials(
        load_recipe("cpu-bookworm"),
        BASE,
        "sha256:base",
        installed_debs(DEBS.format(libc)),
        {"ID": "debian", "VERSION_ID": "12"},
        versions,
    )
    return text.encode()


def sif_with(path: Path, bom: bytes, recorded: str | None = None) -> Path:
    """A SIF by the project's writer whose labels record `recorded` (default: bom's digest)."""
    config = ImageConfig.from_docker(
        {"Labels": {facts.BOM: recorded or facts.bom_digest(bom)}, "Env": []}
    )
    objects = sif_objects("x:1", config, sif_labels("x:1", "sha256:" + "a" * 64, config), bom)
    payload = b"hsqs" + bytes(4092)
    prefix = sif_prefix(
        objects, partition_size=len(payload), arch="amd64", created=1, image_id=uuid.UUID(int=1)
    )
    path.write_bytes(prefix + payload)
    return path


def test_a_sif_carries_it_as_a_cyclonedx_sbom_object(tmp_path: Path) -> None:
    bom = document()
    info = read_sif(sif_with(tmp_path / "a.sif", bom))
    (sbom,) = [d for d in info.descriptors if d.datatype == fmt.DATA_SBOM]
    assert sbom.describe() == "SBOM (CycloneDX JSON)" and sbom.name == "bom.cdx.json"
    assert info.bom == bom
    parts = materials.from_sif(info.path).parts
    assert materials.Part("deb", "libc6", "2.36-9+deb12u13") in parts
    assert materials.Part("pypi", "horovod", "0.28.1") in parts


def test_a_sif_whose_document_was_changed_is_refused(tmp_path: Path) -> None:
    path = sif_with(tmp_path / "a.sif", document(), recorded=facts.bom_digest(b"another"))
    with pytest.raises(StepFailed, match="does not match its label"):
        materials.from_sif(path)


def test_inspect_sbom_and_diff_print_parts_and_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = sif_with(tmp_path / "old.sif", document())
    new = sif_with(tmp_path / "new.sif", document("2.36-9+deb12u14", nccl="2.21.5"))
    assert main(["inspect", str(old), "--sbom"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{old}: ") and any(
        line.split()[:2] == ["deb", "libc6"] for line in out
    )
    assert main(["inspect", str(old), "--diff", str(new), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["changes"] == [
        {"kind": "deb", "name": "libc6", "before": "2.36-9+deb12u13", "after": "2.36-9+deb12u14"},
        {"kind": "verified", "name": "nccl", "before": None, "after": "2.21.5"},
    ]
    assert main(["inspect", str(old), "--diff", str(new)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["~", "deb", "libc6", "2.36-9+deb12u13", "->", "2.36-9+deb12u14"]
    assert lines[2].split() == ["+", "verified", "nccl", "2.21.5"]


def test_an_image_in_the_engine_is_read_and_checked() -> None:
    bom = document()
    image = {"Id": "sha256:img", "Config": {"Labels": {facts.BOM: facts.bom_digest(bom)}}}
    engine = FakeEngine({"x:1": {**image, "Files": {facts.BOM_FILE: bom}}})
    engine.images["sha256:img"] = engine.images["x:1"]
    assert materials.from_image(engine, "x:1").document["specVersion"] == "1.6"
    assert image_bom(engine, "sha256:img", "x:1", image["Config"]["Labels"]) == bom
    engine.images["x:1"]["Files"] = {facts.BOM_FILE: bom.replace(b"libc6", b"libc7")}
    with pytest.raises(StepFailed, match="does not match its label"):
        image_bom(engine, "sha256:img", "x:1", image["Config"]["Labels"])
    with pytest.raises(StepFailed, match="does not match its label"):
        materials.from_image(engine, "x:1")


def test_an_image_built_without_one_converts_without_one_and_inspect_says_so() -> None:
    engine = FakeEngine({"old:1": {"Id": "sha256:old", "Config": {"Labels": {}}}})
    assert image_bom(engine, "sha256:old", "old:1", {}) is None
    with pytest.raises(UserError, match="built without one"):
        materials.from_image(engine, "old:1")
