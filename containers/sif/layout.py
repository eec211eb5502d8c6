"""Where everything goes in a SIF, and the bytes in front of the root filesystem partition.

The native writer keeps Sylabs' layout (header, 48 descriptors from offset 4096, data objects
in order) and puts the squashfs partition last, 4096-aligned. Because the small objects are
known before compression starts, the whole prefix can be computed from the partition's size
alone and written in front of the squashfs afterwards.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from hvd_container.containers.sif import format as fmt


@dataclass(frozen=True)
class DataObject:
    """A small data object stored in front of the root filesystem (definition, JSON)."""

    datatype: int
    data: bytes
    name: str = ""
    group: int = 1
    extra: bytes = b""  # the descriptor's type-specific field (an SBOM's format)


def partition_offset(objects: list[DataObject]) -> int:
    """Offset of the root filesystem partition that follows these objects."""
    end = fmt.DATA_OFFSET + sum(len(obj.data) for obj in objects)
    return fmt.align(end, fmt.PARTITION_ALIGNMENT)


def _descriptor(
    obj_id: int,
    datatype: int,
    *,
    group: int,
    offset: int,
    size: int,
    padded: int,
    time: int,
    name: str,
    extra: bytes = b"",
) -> bytes:
    return fmt.DESCRIPTOR.pack(
        datatype,
        True,
        obj_id,
        group | fmt.GROUP_MASK,
        0,
        offset,
        size,
        padded,
        time,
        time,
        0,
        0,
        fmt.fixed(name.encode(), 127),
        fmt.fixed(extra, 384),
    )


def sif_prefix(
    objects: list[DataObject],
    *,
    partition_size: int,
    arch: str,
    created: int,
    image_id: uuid.UUID,
) -> bytes:
    """Header, descriptor table and small objects: exactly partition_offset(objects) bytes.

    The last descriptor is the primary system partition (squashfs, group 1) of partition_size
    bytes that the caller places right after these bytes.
    """
    if arch not in fmt.ARCH_CODES:
        raise ValueError(f"unknown SIF architecture {arch!r}")
    if len(objects) + 1 > fmt.DESCRIPTOR_CAPACITY:
        raise ValueError("too many data objects for the descriptor table")
    descriptors = []
    body = bytearray()
    cursor = fmt.DATA_OFFSET
    for index, obj in enumerate(objects, start=1):
        descriptors.append(
            _descriptor(
                index,
                obj.datatype,
                group=obj.group,
                offset=cursor,
                size=len(obj.data),
                padded=len(obj.data),
                time=created,
                name=obj.name,
                extra=obj.extra,
            )
        )
        body += obj.data
        cursor += len(obj.data)
    rootfs_offset = partition_offset(objects)
    extra = fmt.PARTITION_EXTRA.pack(fmt.FS_SQUASHFS, fmt.PART_PRIMSYS, fmt.ARCH_CODES[arch])
    descriptors.append(
        _descriptor(
            len(objects) + 1,
            fmt.DATA_PARTITION,
            group=1,
            offset=rootfs_offset,
            size=partition_size,
            padded=rootfs_offset - cursor + partition_size,
            time=created,
            name="",
            extra=extra,
        )
    )
    used = len(descriptors)
    table = b"".join(descriptors) + bytes(fmt.DESCRIPTOR.size * (fmt.DESCRIPTOR_CAPACITY - used))
    header = fmt.HEADER.pack(
        fmt.LAUNCH_SCRIPT,
        fmt.MAGIC,
        fmt.VERSION,
        fmt.ARCH_CODES[arch],
        image_id.bytes,
        created,
        created,
        fmt.DESCRIPTOR_CAPACITY - used,
        fmt.DESCRIPTOR_CAPACITY,
        fmt.DESCRIPTORS_OFFSET,
        len(table),
        fmt.DATA_OFFSET,
        rootfs_offset + partition_size - fmt.DATA_OFFSET,
    )
    prefix = bytearray(rootfs_offset)
    prefix[: len(header)] = header
    prefix[fmt.DESCRIPTORS_OFFSET : fmt.DESCRIPTORS_OFFSET + len(table)] = table
    prefix[fmt.DATA_OFFSET : fmt.DATA_OFFSET + len(body)] = body
    return bytes(prefix)
