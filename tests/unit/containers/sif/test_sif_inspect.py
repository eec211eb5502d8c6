"""`hvd-container inspect FILE.sif` (text and --json) on a small SIF made by the project's own
writer (the native path's objects and layout) around a tiny root filesystem tar; no Docker."""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from pathlib import Path

import pytest
from hvd_container.containers.convert.sif_native import sif_labels
from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.layout import DataObject, partition_offset, sif_prefix
from hvd_container.containers.sif.metadata import ImageConfig
from hvd_container.containers.sif.writer import sif_objects

from hvd_container.cli.app import main

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


# Header fields by their index in fmt.HEADER: 7 free, 8 total, 9/10 descriptors offset/size,
# 11/12 data offset/size.
FREE, TOTAL, DESCR_OFFSET, DESCR_SIZE, DATA_OFFSET, DATA_SIZE = range(7, 13)


def with_header_field(path: Path, index: int, value: int) -> None:
    """Rewrite one header field of the SIF at path in place (a crafted, malformed file)."""
    data = bytearray(path.read_bytes())
    fields = list(fmt.HEADER.unpack_from(data))
    fields[index] = value
    data[: fmt.HEADER.size] = fmt.HEADER.pack(*fields)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("index", "value", "message"),
    [
        (
            DESCR_OFFSET,
            -1,
            "corrupt SIF header: descriptors offset -1, size 28080 (allowed: 0 or more)",
        ),
        (DESCR_OFFSET, -(2**63), "corrupt SIF header: descriptors offset -9223372036854775808"),
        (DESCR_OFFSET, 2**62, "truncated SIF: the descriptor table ends past end of file"),
        (
            DESCR_SIZE,
            -585,
            "corrupt SIF header: descriptors size -585 (allowed: 28080, 48 descriptors of 585 bytes)",
        ),
        (TOTAL, -1, "corrupt SIF header: descriptors total -1 (allowed: 0..65536)"),
        (TOTAL, 2**40, "corrupt SIF header: descriptors total 1099511627776 (allowed: 0..65536)"),
        (FREE, -3, "corrupt SIF header: descriptors free -3 (allowed: 0..48, the total)"),
        (FREE, 49, "corrupt SIF header: descriptors free 49 (allowed: 0..48, the total)"),
        (DATA_OFFSET, -4096, "corrupt SIF header: data offset -4096"),
        (DATA_SIZE, -1, "corrupt SIF header: data offset 32176, size -1 (allowed: 0 or more)"),
        (DATA_SIZE, 2**63 - 1, "truncated SIF: header says"),
    ],
)
def test_malformed_header_fields_are_one_line_errors(
    sif: tuple[Path, bytes, int],
    capsys: pytest.CaptureFixture[str],
    index: int,
    value: int,
    message: str,
) -> None:
    path, _, _ = sif
    with_header_field(path, index, value)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hvd-container: error: {path}: {message}"), err
    assert err.count("\n") == 1  # one line, no traceback


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("offset", -100, "corrupt SIF descriptor: object 1 (Def.FILE) has offset -100"),
        ("size", -5, "corrupt SIF descriptor: object 1 (Def.FILE) has offset 32176, size -5"),
        ("offset", 2**62, "truncated SIF: object 1 (Def.FILE) needs bytes 4611686018427387904.."),
    ],
)
def test_malformed_descriptor_fields_are_one_line_errors(
    sif: tuple[Path, bytes, int],
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: int,
    message: str,
) -> None:
    path, _, _ = sif
    data = bytearray(path.read_bytes())
    first = fmt.DESCRIPTORS_OFFSET
    fields = list(fmt.DESCRIPTOR.unpack_from(data, first))
    fields[{"offset": 5, "size": 6}[field]] = value
    data[first : first + fmt.DESCRIPTOR.size] = fmt.DESCRIPTOR.pack(*fields)
    path.write_bytes(bytes(data))
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hvd-container: error: {path}: {message}"), err
    assert err.count("\n") == 1


def sif_with_labels(tmp_path: Path, labels_json: bytes, datatype: int = fmt.DATA_LABELS) -> Path:
    name = "labels.json" if datatype == fmt.DATA_LABELS else "oci-config.json"
    objects = [DataObject(datatype, labels_json, name=name)]
    prefix = sif_prefix(objects, partition_size=4, arch="amd64", created=1, image_id=uuid.uuid4())
    path = tmp_path / "labels.sif"
    path.write_bytes(prefix + b"root")
    return path


def test_deeply_nested_labels_are_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sif_with_labels(tmp_path, b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"hvd-container: error: {path}: object 1 (labels.json) is not valid JSON: nested too "
        f"deeply\n"
    )


LABELS_JSON = {
    "maintainer": "someone",
    "org.example.obj": {"x": 1, "y": ["a", "é"]},
    "org.example.list": [1, 2],
    "org.example.num": 3,
    "org.example.flag": True,
    "org.example.none": None,
    "org.hvd-container.versions.cuda": {"major": 12},
}


@pytest.mark.parametrize("datatype", [fmt.DATA_LABELS, fmt.DATA_GENERIC_JSON])
def test_non_string_labels_print_as_compact_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], datatype: int
) -> None:
    document = LABELS_JSON if datatype == fmt.DATA_LABELS else {"config": {"Labels": LABELS_JSON}}
    path = sif_with_labels(tmp_path, json.dumps(document).encode(), datatype)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[out.index("build facts:") + 1 : out.index("labels:")] == [
        '  versions.cuda: {"major":12}'
    ]
    assert out[out.index("labels:") + 1 :] == [
        "  maintainer: someone",
        "  org.example.flag: true",
        "  org.example.list: [1,2]",
        "  org.example.none: null",
        "  org.example.num: 3",
        '  org.example.obj: {"x":1,"y":["a","é"]}',
    ]
    assert main(["inspect", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["labels"]["org.example.obj"] == '{"x":1,"y":["a","é"]}'
    assert json.loads(info["labels"]["org.example.obj"]) == LABELS_JSON["org.example.obj"]
