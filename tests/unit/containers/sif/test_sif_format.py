"""SIF layout written by containers.sif.layout and read back by containers.sif.reader."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.layout import DataObject, partition_offset, sif_prefix
from hvd_container.containers.sif.reader import read_sif
from hvd_container.containers.sif.shift import insert_front

from hvd_container.core.errors import UserError

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


def test_partition_descriptor_fields() -> None:
    """The root filesystem descriptor as Apptainer reads it: PrimSys squashfs, arch, group 1,
    4096-aligned after the objects, padding counted from the end of the last object."""
    objs = objects()
    prefix = sif_prefix(
        objs, partition_size=123, arch="arm64", created=5, image_id=uuid.UUID(int=1)
    )
    offset = partition_offset(objs)
    assert len(prefix) == offset
    raw = prefix[fmt.DESCRIPTORS_OFFSET + 3 * fmt.DESCRIPTOR.size :][: fmt.DESCRIPTOR.size]
    (dtype, used, obj_id, group, link, d_offset, size, padded, ctime, mtime, uid, gid, name,
     extra) = fmt.DESCRIPTOR.unpack(raw)  # fmt: skip
    objects_end = fmt.DATA_OFFSET + sum(len(o.data) for o in objs)
    assert (dtype, used, obj_id, group, link) == (fmt.DATA_PARTITION, True, 4, 0xF0000001, 0)
    assert (d_offset, size, padded) == (offset, 123, offset - objects_end + 123)
    assert (ctime, mtime, uid, gid, name.rstrip(b"\0")) == (5, 5, 0, 0, b"")
    assert extra[:11] == b"\x01\x00\x00\x00\x02\x00\x00\x0004\x00"  # Squashfs, PrimSys, "04"
    assert extra[11:] == bytes(384 - 11)
    # The objects themselves sit back to back from DATA_OFFSET, zero-padded up to the rootfs.
    assert prefix[fmt.DATA_OFFSET : objects_end] == b"".join(o.data for o in objs)
    assert prefix[objects_end:] == bytes(offset - objects_end)
    # Unused descriptor slots are zero; the header counts them as free.
    assert prefix[fmt.DESCRIPTORS_OFFSET + 4 * fmt.DESCRIPTOR.size : fmt.DATA_OFFSET] == bytes(
        44 * fmt.DESCRIPTOR.size
    )
    header = fmt.HEADER.unpack_from(prefix)
    assert header[4] == uuid.UUID(int=1).bytes and header[5:8] == (5, 5, 44)


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
    with pytest.raises(UserError, match="no such file"):
        read_sif(tmp_path / "missing.sif")


@pytest.mark.parametrize("force_move", [False, True])
def test_insert_front_shifts_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, force_move: bool
) -> None:
    from hvd_container.containers.sif import shift

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


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"config": "oops"}, "`config` is not an object"),
        ({"config": {"Labels": ["a"]}}, "`Labels` is not an object"),
        ({"Labels": "x"}, "`Labels` is not an object"),
    ],
)
def test_malformed_oci_config_is_a_one_line_error(
    tmp_path: Path, config: dict[str, object], message: str
) -> None:
    objs = [DataObject(fmt.DATA_GENERIC_JSON, json.dumps(config).encode(), name="oci-config.json")]
    prefix = sif_prefix(objs, partition_size=10, arch="amd64", created=1, image_id=uuid.uuid4())
    sif = tmp_path / "a.sif"
    sif.write_bytes(prefix + bytes(10))
    with pytest.raises(UserError, match=message) as exc:
        read_sif(sif)
    assert str(exc.value).startswith(f"{sif}: object 1 (oci-config.json): ")
    assert "\n" not in str(exc.value)
