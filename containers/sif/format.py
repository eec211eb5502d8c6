"""The SIF on-disk layout (as Sylabs' sif library writes it), packed and unpacked with struct.

Global header (128 bytes, little endian): launch script, magic, version, arch, UUID, created,
modified, free/total descriptors, descriptors offset/size, data offset/size.
Descriptor (585 bytes): data type, used flag, id, group id, linked id, offset, size,
size with padding, created, modified, uid, gid, name, extra (type-specific metadata).
"""

from __future__ import annotations

import struct
from pathlib import Path

HEADER = struct.Struct("<32s10s3s3s16s8q")
DESCRIPTOR = struct.Struct("<i?3I7q128s384s")
PARTITION_EXTRA = struct.Struct("<ii3s")
# an SBOM object's extra: its format (sylabs/sif's SBOMFormat, an int32; CycloneDX JSON is 1)
SBOM_EXTRA = struct.Struct("<i")
SBOM_CYCLONEDX_JSON = 1

LAUNCH_SCRIPT = b"#!/usr/bin/env run-singularity\n"
MAGIC = b"SIF_MAGIC"
VERSION = b"01"

# Sylabs' defaults (CreateContainer): descriptors start at 4096, room for 48 of them.
DESCRIPTORS_OFFSET = 4096
DESCRIPTOR_CAPACITY = 48
DATA_OFFSET = DESCRIPTORS_OFFSET + DESCRIPTOR_CAPACITY * DESCRIPTOR.size
PARTITION_ALIGNMENT = 4096

GROUP_MASK = 0xF0000000

DATA_DEFFILE = 0x4001
DATA_ENVVAR = 0x4002
DATA_LABELS = 0x4003
DATA_PARTITION = 0x4004
DATA_SIGNATURE = 0x4005
DATA_GENERIC_JSON = 0x4006
DATA_GENERIC = 0x4007
DATA_CRYPTO_MESSAGE = 0x4008
DATA_SBOM = 0x4009
DATA_OCI_ROOT_INDEX = 0x400A
DATA_OCI_BLOB = 0x400B

DATA_TYPE_NAMES = {
    DATA_DEFFILE: "Def.FILE",
    DATA_ENVVAR: "Env.Vars",
    DATA_LABELS: "JSON.Labels",
    DATA_PARTITION: "FS",
    DATA_SIGNATURE: "Signature",
    DATA_GENERIC_JSON: "JSON.Generic",
    DATA_GENERIC: "Generic/Raw",
    DATA_CRYPTO_MESSAGE: "Cryptographic Message",
    DATA_SBOM: "SBOM",
    DATA_OCI_ROOT_INDEX: "OCI.RootIndex",
    DATA_OCI_BLOB: "OCI.Blob",
}

FS_SQUASHFS = 1
FS_NAMES = {1: "Squashfs", 2: "Ext3", 3: "Archive", 4: "Raw", 5: "Encrypted squashfs"}

PART_SYSTEM = 1
PART_PRIMSYS = 2
PART_NAMES = {1: "System", 2: "*System", 3: "Data", 4: "Overlay"}

# SIF arch codes <-> the Go/Docker architecture names.
ARCH_CODES = {
    "386": b"01",
    "amd64": b"02",
    "arm": b"03",
    "arm64": b"04",
    "ppc64": b"05",
    "ppc64le": b"06",
    "mips": b"07",
    "mipsle": b"08",
    "mips64": b"09",
    "mips64le": b"10",
    "s390x": b"11",
}
ARCH_NAMES = {code: name for name, code in ARCH_CODES.items()}


def cstr(raw: bytes) -> bytes:
    """The bytes of a NUL-terminated fixed-size field."""
    return raw.split(b"\0", 1)[0]


def fixed(value: bytes, size: int) -> bytes:
    """A NUL-padded fixed-size field (struct pads, but refuses nothing: check length here)."""
    if len(value) > size:
        raise ValueError(f"{value[:40]!r}... longer than {size} bytes")
    return value


def align(offset: int, alignment: int) -> int:
    """The first offset >= offset that is a multiple of alignment."""
    return -(-offset // alignment) * alignment


def has_sif_magic(path: Path) -> bool:
    """True when the file starts like a SIF (the magic sits after the 32-byte launch script).
    An unreadable file raises OSError: the caller words the error for its flag."""
    with path.open("rb") as fh:
        return MAGIC in fh.read(64)
