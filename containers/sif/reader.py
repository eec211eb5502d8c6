"""Read a SIF file in pure Python: descriptors, arch, labels and build facts.

Used by `hvd-container inspect` and by the launcher (which needs the root filesystem's
partition offset and the image's build facts without Apptainer installed).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvd_container.containers.sif import format as fmt

from hvd_container import facts
from hvd_container.core.errors import UserError, brief
from hvd_container.core.files import open_regular

_MAX_JSON_OBJECT = 16 * 1024 * 1024
# Sylabs' writer defaults to 48; anything near this is not a SIF this reader should trust.
_MAX_DESCRIPTORS = 65536


@dataclass(frozen=True)
class SifDescriptor:
    """One data object of a SIF file."""

    id: int
    datatype: int
    datatype_name: str
    group: int | None
    link: int
    offset: int
    size: int
    name: str
    fstype: str | None = None
    parttype: str | None = None
    arch: str | None = None
    sbom_format: int | None = None  # an SBOM object's format (fmt.SBOM_CYCLONEDX_JSON)

    def describe(self) -> str:
        """The `siftool list` style summary, e.g. `FS (Squashfs/*System/amd64)`."""
        if self.datatype == fmt.DATA_PARTITION:
            return f"{self.datatype_name} ({self.fstype}/{self.parttype}/{self.arch})"
        if self.datatype == fmt.DATA_SBOM:
            known = self.sbom_format == fmt.SBOM_CYCLONEDX_JSON
            return f"{self.datatype_name} ({'CycloneDX JSON' if known else self.sbom_format})"
        return self.datatype_name

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.describe(),
            "group": self.group,
            "link": self.link or None,
            "offset": self.offset,
            "size": self.size,
            "name": self.name,
        }


@dataclass(frozen=True)
class SifInfo:
    """What a SIF file holds, as far as launching it is concerned."""

    path: Path
    uuid: str
    arch: str
    created: int
    modified: int
    descriptors: tuple[SifDescriptor, ...]
    labels: dict[str, str] = field(default_factory=dict)
    definition: str | None = None
    rootfs_offset: int = 0
    rootfs_size: int = 0
    bom: bytes | None = None  # the first CycloneDX JSON SBOM object, as stored

    @property
    def build_facts(self) -> dict[str, str]:
        """Labels recorded by `hvd-container build`, without their common prefix."""
        return facts.without_prefix(self.labels)

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "uuid": self.uuid,
            "arch": self.arch,
            "created": self.created,
            "modified": self.modified,
            "rootfs": {"offset": self.rootfs_offset, "size": self.rootfs_size},
            "descriptors": [d.as_dict() for d in self.descriptors],
            "labels": dict(sorted(self.labels.items())),
            "build_facts": self.build_facts,
        }


def _parse_descriptor(raw: bytes) -> SifDescriptor | None:
    (dtype, used, obj_id, group, link, offset, size, _padded, _ctime, _mtime, _uid, _gid, name,
     extra) = fmt.DESCRIPTOR.unpack(raw)  # fmt: skip
    if not used:
        return None
    fstype = parttype = arch = None
    sbom_format = fmt.SBOM_EXTRA.unpack_from(extra)[0] if dtype == fmt.DATA_SBOM else None
    if dtype == fmt.DATA_PARTITION:
        fs, part, arch_code = fmt.PARTITION_EXTRA.unpack_from(extra)
        fstype = fmt.FS_NAMES.get(fs, f"unknown({fs})")
        parttype = fmt.PART_NAMES.get(part, f"unknown({part})")
        arch = fmt.ARCH_NAMES.get(fmt.cstr(arch_code), "unknown")
    return SifDescriptor(
        id=obj_id,
        datatype=dtype,
        datatype_name=fmt.DATA_TYPE_NAMES.get(dtype, f"unknown(0x{dtype:x})"),
        group=(group & ~fmt.GROUP_MASK) or None,
        link=link,
        offset=offset,
        size=size,
        name=fmt.cstr(name).decode(errors="replace"),
        fstype=fstype,
        parttype=parttype,
        arch=arch,
        sbom_format=sbom_format,
    )


def _read_object(fh: Any, desc: SifDescriptor, path: Path) -> bytes:
    if desc.size > _MAX_JSON_OBJECT:
        raise UserError(f"{path}: descriptor {desc.id} is {desc.size} bytes, too large to read")
    fh.seek(desc.offset)
    data = fh.read(desc.size)
    if len(data) != desc.size:
        raise UserError(f"{path}: truncated SIF: object {desc.id} ends past the end of the file")
    return data


def label_text(value: Any) -> str:
    """A label value as text: strings as they are, anything else (a SIF's labels.json may hold
    numbers, lists, objects) as compact JSON rather than Python's repr."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _labels_from(fh: Any, descriptors: tuple[SifDescriptor, ...], path: Path) -> dict[str, str]:
    for desc in descriptors:
        if desc.datatype == fmt.DATA_LABELS:
            labels = _json_object(_read_object(fh, desc, path), desc, path)
            return {str(k): label_text(v) for k, v in labels.items()}
    # Apptainer-built SIFs carry no labels object; their OCI image config has the labels.
    for desc in descriptors:
        if desc.datatype == fmt.DATA_GENERIC_JSON and "oci-config" in desc.name:
            config = _json_object(_read_object(fh, desc, path), desc, path)
            inner = config.get("config")
            if inner is not None and not isinstance(inner, dict):
                raise UserError(
                    f"{path}: object {desc.id} ({desc.name}): `config` is not an object"
                )
            labels = config.get("Labels") or (inner or {}).get("Labels") or {}
            if not isinstance(labels, dict):
                raise UserError(
                    f"{path}: object {desc.id} ({desc.name}): `Labels` is not an object"
                )
            return {str(k): label_text(v) for k, v in labels.items()}
    return {}


def _json_object(data: bytes, desc: SifDescriptor, path: Path) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:  # bad UTF-8 or JSON, or an integer of more than 4300 digits
        raise UserError(
            f"{path}: object {desc.id} ({desc.name}) is not valid JSON: {brief(str(exc), 120)}"
        ) from None
    except RecursionError:  # a crafted object nested thousands of levels deep
        raise UserError(
            f"{path}: object {desc.id} ({desc.name}) is not valid JSON: nested too deeply"
        ) from None
    if not isinstance(value, dict):
        raise UserError(f"{path}: object {desc.id} ({desc.name}) is not a JSON object")
    return value


def _check_header(
    path: Path,
    file_size: int,
    total: int,
    free: int,
    descr_offset: int,
    descr_size: int,
    data_offset: int,
    data_size: int,
) -> None:
    """One-line errors for header fields that are impossible or point outside the file (a
    negative offset would otherwise reach fh.seek and fail with EINVAL)."""
    corrupt = f"{path}: corrupt SIF header:"
    if not 0 <= total <= _MAX_DESCRIPTORS:
        raise UserError(f"{corrupt} descriptors total {total} (allowed: 0..{_MAX_DESCRIPTORS})")
    if not 0 <= free <= total:
        raise UserError(f"{corrupt} descriptors free {free} (allowed: 0..{total}, the total)")
    if descr_size != total * fmt.DESCRIPTOR.size:
        raise UserError(
            f"{corrupt} descriptors size {descr_size} (allowed: {total * fmt.DESCRIPTOR.size}, "
            f"{total} descriptors of {fmt.DESCRIPTOR.size} bytes)"
        )
    for name, offset, size in (
        ("descriptors", descr_offset, descr_size),
        ("data", data_offset, data_size),
    ):
        if offset < 0 or size < 0:
            raise UserError(f"{corrupt} {name} offset {offset}, size {size} (allowed: 0 or more)")
    if descr_offset + descr_size > file_size:
        raise UserError(
            f"{path}: truncated SIF: the descriptor table ends past end of file "
            f"(bytes {descr_offset}..{descr_offset + descr_size}, file has {file_size})"
        )
    if data_offset + data_size > file_size:
        raise UserError(
            f"{path}: truncated SIF: header says {data_offset + data_size} bytes, "
            f"file has {file_size}"
        )


# squashfs's superblock: the magic, then at byte 20 the compressor's id (squashfs_fs.h)
_SQUASHFS_MAGIC = b"hsqs"
_SQUASHFS_COMPRESSORS = {1: "gzip", 2: "lzma", 3: "lzo", 4: "xz", 5: "lz4", 6: "zstd"}


def rootfs_compressor(info: SifInfo) -> str | None:
    """The compressor of the SIF's root filesystem (squashfs), or None where it is not one."""
    if not info.rootfs_size:
        return None
    fh, _size = open_regular(info.path, "a SIF file")
    with fh:
        fh.seek(info.rootfs_offset)
        head = fh.read(22)
    if len(head) < 22 or head[:4] != _SQUASHFS_MAGIC:
        return None
    return _SQUASHFS_COMPRESSORS.get(int.from_bytes(head[20:22], "little"))


def read_sif(path: str | os.PathLike[str]) -> SifInfo:
    """Parse the SIF at path. Raises UserError for a missing, truncated or non-SIF file."""
    path = Path(path)
    fh, _size = open_regular(path, "a SIF file")
    try:
        with fh:
            return _read(fh, path)
    except OSError as exc:  # EIO and the like, midway
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _read(fh: Any, path: Path) -> SifInfo:
    file_size = os.fstat(fh.fileno()).st_size
    raw = fh.read(fmt.HEADER.size)
    if len(raw) < fmt.HEADER.size:
        raise UserError(f"{path}: not a SIF file (only {len(raw)} bytes, header needs 128)")
    (_launch, magic, version, arch_code, image_id, created, modified, free, total,
     descr_offset, descr_size, data_offset, data_size) = fmt.HEADER.unpack(raw)  # fmt: skip
    if fmt.cstr(magic) != fmt.MAGIC:
        raise UserError(f"{path}: not a SIF file (no SIF_MAGIC in the header)")
    if fmt.cstr(version) != fmt.VERSION:
        shown = fmt.cstr(version).decode("ascii", "backslashreplace")
        raise UserError(
            f"{path}: SIF format version {shown!r} is not supported (allowed: "
            f"{fmt.VERSION.decode()}, as siftool and Apptainer write)"
        )
    _check_header(path, file_size, total, free, descr_offset, descr_size, data_offset,
                  data_size)  # fmt: skip
    fh.seek(descr_offset)
    table = fh.read(descr_size)
    descriptors = tuple(
        d
        for i in range(total)
        if (d := _parse_descriptor(table[i * fmt.DESCRIPTOR.size : (i + 1) * fmt.DESCRIPTOR.size]))
    )
    for desc in descriptors:
        if desc.offset < 0 or desc.size < 0:
            raise UserError(
                f"{path}: corrupt SIF descriptor: object {desc.id} ({desc.describe()}) has offset "
                f"{desc.offset}, size {desc.size} (allowed: 0 or more)"
            )
        if desc.offset + desc.size > file_size:
            raise UserError(
                f"{path}: truncated SIF: object {desc.id} ({desc.describe()}) needs bytes "
                f"{desc.offset}..{desc.offset + desc.size}, file has {file_size}"
            )
        if (
            desc.size
            and not data_offset <= desc.offset <= desc.offset + desc.size <= data_offset + data_size
        ):
            raise UserError(
                f"{path}: corrupt SIF descriptor: object {desc.id} ({desc.describe()}) at bytes "
                f"{desc.offset}..{desc.offset + desc.size} lies outside the data area "
                f"({data_offset}..{data_offset + data_size}): it would overlap the header or "
                "the descriptor table"
            )
    primary = next(
        (d for d in descriptors if d.datatype == fmt.DATA_PARTITION and d.parttype == "*System"),
        None,
    )
    definition = next(
        (
            _read_object(fh, d, path).decode(errors="replace")
            for d in descriptors
            if d.datatype == fmt.DATA_DEFFILE
        ),
        None,
    )
    return SifInfo(
        path=path,
        uuid=str(uuid.UUID(bytes=image_id)),
        arch=fmt.ARCH_NAMES.get(fmt.cstr(arch_code), "unknown"),
        created=created,
        modified=modified,
        descriptors=descriptors,
        labels=_labels_from(fh, descriptors, path),
        definition=definition,
        bom=next(
            (
                _read_object(fh, d, path)
                for d in descriptors
                if d.datatype == fmt.DATA_SBOM and d.sbom_format == fmt.SBOM_CYCLONEDX_JSON
            ),
            None,
        ),
        rootfs_offset=primary.offset if primary else 0,
        rootfs_size=primary.size if primary else 0,
    )
