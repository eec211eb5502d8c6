"""SIF layout written by containers.sif.layout and read back by containers.sif.reader."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from containers.sif import format as fmt
from containers.sif.layout import DataObject, partition_offset, sif_prefix
from containers.sif.reader import read_sif
from containers.sif.shift import insert_front
from hvd_container.errors import UserError

LABELS = {"org.hvd-container.versions.torch": "2.13.0", "maintainer": "someone"}


def objects() -> list[DataObject]:
    return [
        DataObject(fmt.DATA_DEFFILE, b"bootstrap: docker-daemon\nfrom: x:1\n"),
        DataObject(fmt.DATA_GENERIC_JSON, b'{"Cmd": ["sh"]}', name="oci-config.json"),
        DataObject(fmt.DATA_LABELS, json.dumps(LABELS).encode(), name="labels.json"),
    ]


def write_sif(path: Path, payload: bytes, arch: str = "amd64", created: int = 1700000000) -> None:
    objs = objects()
    prefix = sif_prefix(
        objs, partition_size=len(payload), arch=arch, created=created, image_id=uuid.UUID(int=7)
    )
    path.write_bytes(prefix + payload)


def test_header_and_descriptors_follow_the_sylabs_layout(tmp_path: Path) -> None:
    payload = b"hsqs" + os.urandom(10000)
    sif = tmp_path / "x.sif"
    write_sif(sif, payload)
    raw = sif.read_bytes()
    assert raw.startswith(b"#!/usr/bin/env run-singularity\n")
    header = fmt.HEADER.unpack_from(raw)
    assert header[1].rstrip(b"\0") == b"SIF_MAGIC"
    assert header[3].rstrip(b"\0") == b"02"  # amd64, copied from the primary partition
    assert header[8:12] == (48, 4096, 48 * 585, 4096 + 48 * 585)
    offset = partition_offset(objects())
    assert offset % 4096 == 0
    assert raw[offset:] == payload
    assert header[12] == len(raw) - header[11]  # data size runs to the end of the file


def test_reader_round_trip(tmp_path: Path) -> None:
    payload = os.urandom(5000)
    sif = tmp_path / "x.sif"
    write_sif(sif, payload, arch="ppc64le")
    info = read_sif(sif)
    assert info.arch == "ppc64le"
    assert info.uuid == str(uuid.UUID(int=7))
    assert info.created == 1700000000
    assert [d.describe() for d in info.descriptors] == [
        "Def.FILE",
        "JSON.Generic",
        "JSON.Labels",
        "FS (Squashfs/*System/ppc64le)",
    ]
    assert all(d.group == 1 for d in info.descriptors)
    assert info.labels == LABELS
    assert info.build_facts == {"versions.torch": "2.13.0"}
    assert info.definition == "bootstrap: docker-daemon\nfrom: x:1\n"
    assert sif.read_bytes()[info.rootfs_offset :] == payload
    assert info.rootfs_size == len(payload)
    as_json = json.loads(json.dumps(info.as_dict()))
    assert as_json["rootfs"] == {"offset": info.rootfs_offset, "size": len(payload)}


def test_same_inputs_give_same_bytes() -> None:
    one = sif_prefix(
        objects(), partition_size=123, arch="arm64", created=5, image_id=uuid.UUID(int=1)
    )
    two = sif_prefix(
        objects(), partition_size=123, arch="arm64", created=5, image_id=uuid.UUID(int=1)
    )
    assert one == two


def test_labels_fall_back_to_the_oci_config_of_apptainer_images(tmp_path: Path) -> None:
    objs = [
        DataObject(fmt.DATA_DEFFILE, b"bootstrap: docker\n"),
        DataObject(
            fmt.DATA_GENERIC_JSON,
            json.dumps({"Labels": {"a": "b"}}).encode(),
            name="oci-config.json",
        ),
    ]
    prefix = sif_prefix(objs, partition_size=10, arch="amd64", created=1, image_id=uuid.uuid4())
    sif = tmp_path / "a.sif"
    sif.write_bytes(prefix + bytes(10))
    assert read_sif(sif).labels == {"a": "b"}


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (0, "not a SIF file"),
        (100, "not a SIF file"),
        (5000, "descriptor table ends past end of file"),
        (-1, "truncated SIF"),
    ],
)
def test_truncated_files_give_one_line_errors(tmp_path: Path, cut: int, message: str) -> None:
    sif = tmp_path / "x.sif"
    write_sif(sif, os.urandom(9000))
    data = sif.read_bytes()
    sif.write_bytes(data[:cut] if cut >= 0 else data[:cut])
    with pytest.raises(UserError, match=message) as exc:
        read_sif(sif)
    assert "\n" not in str(exc.value)
    assert str(sif) in str(exc.value)


def test_non_sif_and_missing_files(tmp_path: Path) -> None:
    other = tmp_path / "file.sif"
    other.write_bytes(b"x" * 4096)
    with pytest.raises(UserError, match="no SIF_MAGIC"):
        read_sif(other)
    with pytest.raises(UserError, match="cannot open"):
        read_sif(tmp_path / "missing.sif")


@pytest.mark.parametrize("force_move", [False, True])
def test_insert_front_shifts_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, force_move: bool
) -> None:
    from containers.sif import shift

    if force_move:
        monkeypatch.setattr(shift, "_insert_range", lambda fd, length: False)
        monkeypatch.setattr(shift, "_CHUNK", 4096 * 3)  # several chunks, uneven tail
    data = os.urandom(4096 * 10 + 123)
    path = tmp_path / "f"
    path.write_bytes(data)
    with path.open("r+b") as fh:
        method = insert_front(fh.fileno(), 8192)
    assert method in (("move",) if force_move else ("insert-range", "move"))
    assert path.read_bytes()[8192:] == data
    assert path.stat().st_size == len(data) + 8192
