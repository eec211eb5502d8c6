"""`hvd-container inspect FILE.sif` (text and --json) on a small SIF made by the project's own
writer (the native path's objects and layout) around a tiny root filesystem tar; no Docker."""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from pathlib import Path

import pytest

from containers.convert.sif_native import sif_labels, sif_objects
from containers.sif.layout import partition_offset, sif_prefix
from containers.sif.metadata import ImageConfig
from hvd_container.cli import main

REF = "hvd/cpu-bookworm:1"
IMAGE_ID = "sha256:" + "ab" * 32
DOCKER_CONFIG = {
    "Env": ["PATH=/usr/bin:/bin", "OMP_NUM_THREADS=1"],
    "Cmd": ["python3"],
    "Labels": {
        "org.hvd-container.recipe.name": "cpu-bookworm",
        "org.hvd-container.versions.horovod": "0.28.1",
        "maintainer": "someone",
    },
}


def tiny_rootfs() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("etc/hostname")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"box\n"))
    return buf.getvalue()


@pytest.fixture
def sif(tmp_path: Path) -> tuple[Path, bytes, int]:
    config = ImageConfig.from_docker(DOCKER_CONFIG)
    objects = sif_objects(REF, config, sif_labels(REF, IMAGE_ID, config))
    rootfs = tiny_rootfs()
    prefix = sif_prefix(
        objects, partition_size=len(rootfs), arch="arm64", created=1_700_000_000,
        image_id=uuid.UUID(int=42),
    )  # fmt: skip
    path = tmp_path / "cpu.sif"
    path.write_bytes(prefix + rootfs)
    return path, rootfs, partition_offset(objects)


def test_inspect_text(sif: tuple[Path, bytes, int], capsys: pytest.CaptureFixture[str]) -> None:
    path, rootfs, offset = sif
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        f"file:   {path}",
        "arch:   arm64",
        f"id:     {uuid.UUID(int=42)}",
        f"rootfs: offset {offset}, {len(rootfs)} bytes",
    ]
    assert out[4] == "descriptors:"
    rows = [line.split() for line in out[5:9]]
    assert [row[0] for row in rows] == ["1", "2", "3", "4"]
    assert all(row[1:3] == ["group", "1"] for row in rows)
    assert [" ".join(row[4:]) for row in rows] == [
        "Def.FILE",
        "JSON.Generic oci-config.json",
        "JSON.Labels labels.json",
        "FS (Squashfs/*System/arm64)",
    ]
    assert rows[3][3] == f"{offset}-{offset + len(rootfs)}"
    facts = out[out.index("build facts:") + 1 : out.index("labels:")]
    assert facts == [
        "  recipe.name: cpu-bookworm",
        f"  sif.source-id: {IMAGE_ID}",
        f"  sif.source-image: {REF}",
        "  versions.horovod: 0.28.1",
    ]
    assert out[out.index("labels:") + 1 :] == [
        "  maintainer: someone",
        "  org.label-schema.schema-version: 1.0",
    ]


def test_inspect_json(sif: tuple[Path, bytes, int], capsys: pytest.CaptureFixture[str]) -> None:
    path, rootfs, offset = sif
    assert main(["inspect", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["arch"] == "arm64"
    assert info["created"] == 1_700_000_000
    assert info["rootfs"] == {"offset": offset, "size": len(rootfs)}
    assert path.read_bytes()[offset:] == rootfs  # the partition is where inspect says
    assert [d["type"] for d in info["descriptors"]] == [
        "Def.FILE", "JSON.Generic", "JSON.Labels", "FS (Squashfs/*System/arm64)"
    ]  # fmt: skip
    assert info["build_facts"]["sif.source-image"] == REF
    assert info["labels"]["maintainer"] == "someone"


def test_inspect_truncated_is_one_line(
    sif: tuple[Path, bytes, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, offset = sif
    path.write_bytes(path.read_bytes()[: offset + 10])
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hvd-container: error: {path}: truncated SIF")
    assert err.count("\n") == 1
