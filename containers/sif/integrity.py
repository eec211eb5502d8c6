"""The sif library's integrity format: what a SIF signature covers, and its data object.

Apptainer and SingularityCE sign a SIF per object group (sylabs/sif, pkg/integrity): the
message is JSON naming digests of the header's fixed fields and, per object of the group, of
its descriptor's protected fields and of its data; it is clear-signed with OpenPGP and stored
as a Signature object (no group, linked to the group it covers; its extra field holds the hash
type and the signer's primary key fingerprint). This module computes that message, reads the
signatures a file holds, appends one, and says which objects no longer match a message. The
OpenPGP part is containers/openpgp.py; nothing here trusts a message that was not verified.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.reader import read_sif

from hvd_container.core.errors import UserError, brief
from hvd_container.core.files import open_regular

# a Signature object's extra field: hash type (sylabs/sif's hashType, SHA-256 is 1), then the
# signing entity's fingerprint in 64 bytes
SIGNATURE_EXTRA = struct.Struct("<i64s")
HASH_SHA256 = 1
# the descriptor fields a signature covers, in the library's order (Descriptor.GetIntegrityReader)
_PROTECTED = struct.Struct("<i?IIqqqq")
_METADATA_VERSION = 1
_CHUNK = 1 << 20
_MAX_SIGNATURE = 1 << 20


@dataclass(frozen=True)
class RawDescriptor:
    """One used descriptor with every field, as the integrity format needs them."""

    slot: int
    datatype: int
    id: int
    group: int  # without the group flag; 0: no group
    link: int  # raw: a group link has the group flag set
    offset: int
    size: int
    created: int
    uid: int
    gid: int
    name: bytes
    extra: bytes

    def protected(self, relative_id: int) -> bytes:
        """The bytes a signature's descriptor digest is taken over."""
        used = True
        fields = (self.datatype, used, relative_id, self.link, self.size, self.created,
                  self.uid, self.gid)  # fmt: skip
        return _PROTECTED.pack(*fields) + self.name + self.extra


@dataclass(frozen=True)
class Signature:
    """A Signature object: the group it covers, its clear-signed message and the fingerprint
    its descriptor names (to be checked against the key that verifies the message)."""

    id: int
    group: int
    hash_type: int
    fingerprint: str  # upper-case hex, as gpg prints it
    message: bytes


@dataclass(frozen=True)
class Layout:
    """A SIF's header fields and used descriptors."""

    header: tuple[Any, ...]
    descriptors: tuple[RawDescriptor, ...]

    @property
    def groups(self) -> list[int]:
        """The object groups a signature can cover, ascending."""
        return sorted({d.group for d in self.descriptors if d.group})

    def members(self, group: int) -> list[RawDescriptor]:
        return sorted((d for d in self.descriptors if d.group == group), key=lambda d: d.id)

    def minimum_id(self, group: int) -> int:
        return min(d.id for d in self.members(group))


def layout(path: Path) -> Layout:
    """The header and descriptors of a SIF that read_sif accepts (bounds already checked)."""
    read_sif(path)
    fh, _size = open_regular(path, "a SIF file")
    with fh:
        header = fmt.HEADER.unpack(fh.read(fmt.HEADER.size))
        total, offset = header[8], header[9]
        fh.seek(offset)
        table = fh.read(total * fmt.DESCRIPTOR.size)
    found = []
    for slot in range(total):
        fields = fmt.DESCRIPTOR.unpack_from(table, slot * fmt.DESCRIPTOR.size)
        (dtype, used, obj_id, group, link, d_offset, size, _padded, created, _modified, uid, gid,
         name, extra) = fields  # fmt: skip
        if used:
            found.append(RawDescriptor(slot, dtype, obj_id, group & ~fmt.GROUP_MASK, link,
                                       d_offset, size, created, uid, gid, name, extra))  # fmt: skip
    return Layout(header, tuple(found))


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _object_digest(fh: BinaryIO, desc: RawDescriptor) -> str:
    fh.seek(desc.offset)
    hasher = hashlib.sha256()
    left = desc.size
    while left:
        chunk = fh.read(min(_CHUNK, left))
        if not chunk:
            raise UserError(f"object {desc.id} ends past the end of the file")
        hasher.update(chunk)
        left -= len(chunk)
    return "sha256:" + hasher.hexdigest()


def _header_digest(header: tuple[Any, ...]) -> str:
    launch, magic, version, _arch, image_id = header[:5]
    return _digest(launch + magic + version + image_id)


def message(path: Path, group: int) -> bytes:
    """The JSON a signature of `group` signs: the library's imageMetadata, as Go encodes it."""
    found = layout(path)
    members = found.members(group)
    if not members:
        raise UserError(f"{path}: no object group {group} (groups: {found.groups or 'none'})")
    base = found.minimum_id(group)
    fh, _size = open_regular(path, "a SIF file")
    with fh:
        objects = [
            {
                "relativeId": d.id - base,
                "descriptorDigest": _digest(d.protected(d.id - base)),
                "objectDigest": _object_digest(fh, d),
            }
            for d in members
        ]
    metadata = {
        "version": _METADATA_VERSION,
        "header": {"digest": _header_digest(found.header)},
        "objects": objects,
    }
    return json.dumps(metadata, separators=(",", ":")).encode()


def signatures(path: Path) -> list[Signature]:
    """The signatures the SIF holds that are linked to an object group, in object order."""
    found = layout(path)
    result = []
    fh, _size = open_regular(path, "a SIF file")
    with fh:
        for d in found.descriptors:
            if d.datatype != fmt.DATA_SIGNATURE or not d.link & fmt.GROUP_MASK:
                continue
            if d.size > _MAX_SIGNATURE:
                raise UserError(f"{path}: signature object {d.id} is {d.size} bytes, too large")
            fh.seek(d.offset)
            hash_type, entity = SIGNATURE_EXTRA.unpack_from(d.extra)
            result.append(
                Signature(
                    d.id,
                    d.link & ~fmt.GROUP_MASK,
                    hash_type,
                    entity.rstrip(b"\0").hex().upper(),
                    fh.read(d.size),
                )  # fmt: skip
            )
    return result


def mismatches(path: Path, group: int, signed: bytes) -> list[str]:
    """What no longer matches a verified message of `group`: [] when the header and every
    object of the group are as signed (the library's groupVerifier, all objects required)."""
    try:
        metadata = json.loads(signed)
        header_digest = metadata["header"]["digest"]
        objects = {int(o["relativeId"]): o for o in metadata["objects"]}
        version = metadata["version"]
    except (ValueError, KeyError, TypeError) as exc:
        return [f"the signed message is not the integrity format's JSON ({brief(str(exc), 80)})"]
    if version != _METADATA_VERSION:
        return [f"the signed message has version {version!r} (known: {_METADATA_VERSION})"]
    found = layout(path)
    problems = []
    if header_digest != _header_digest(found.header):
        problems.append("the header (its launch script, magic, version or ID) changed")
    members = found.members(group)
    base = found.minimum_id(group) if members else 0
    now = {d.id - base: d for d in members}
    if sorted(now) != sorted(objects):
        problems.append(
            f"group {group} holds objects {sorted(d.id for d in members)}, the signature covers "
            f"{sorted(base + i for i in objects)}"
        )
    fh, _size = open_regular(path, "a SIF file")
    with fh:
        for relative, d in sorted(now.items()):
            signed_object = objects.get(relative)
            if signed_object is None:
                continue
            if signed_object.get("descriptorDigest") != _digest(d.protected(relative)):
                problems.append(f"object {d.id}'s descriptor changed")
            elif signed_object.get("objectDigest") != _object_digest(fh, d):
                problems.append(f"object {d.id}'s data changed")
    return problems


def append_signature(path: Path, group: int, clearsigned: bytes, fingerprint: str) -> int:
    """Add a Signature object for `group` at the end of the data; its object ID.

    The data goes first, then its descriptor, then the header's counts, each flushed: a failure
    before the descriptor is written cuts the file back to its old length."""
    found = layout(path)
    header = list(found.header)
    free_slots = [s for s in range(header[8]) if s not in {d.slot for d in found.descriptors}]
    if not free_slots:
        raise UserError(f"{path}: no free descriptor left for a signature ({header[8]} in use)")
    slot = free_slots[0]
    obj_id = slot + 1
    if any(d.id == obj_id for d in found.descriptors):
        raise UserError(f"{path}: object ID {obj_id} of the free descriptor is already in use")
    offset = header[11] + header[12]
    now = int(time.time())
    extra = SIGNATURE_EXTRA.pack(HASH_SHA256, bytes.fromhex(fingerprint))
    descriptor = fmt.DESCRIPTOR.pack(
        fmt.DATA_SIGNATURE, True, obj_id, fmt.GROUP_MASK, group | fmt.GROUP_MASK, offset,
        len(clearsigned), len(clearsigned), now, now, 0, 0, bytes(128), fmt.fixed(extra, 384),
    )  # fmt: skip
    header[7] -= 1
    header[6] = now
    header[12] += len(clearsigned)
    with open(path, "r+b") as fh:
        length = os.fstat(fh.fileno()).st_size
        try:
            fh.seek(offset)
            fh.write(clearsigned)
            fh.flush()
            os.fsync(fh.fileno())
        except BaseException:
            fh.truncate(length)
            raise
        fh.seek(header[9] + slot * fmt.DESCRIPTOR.size)
        fh.write(descriptor)
        fh.seek(0)
        fh.write(fmt.HEADER.pack(*header))
        fh.flush()
        os.fsync(fh.fileno())
    return obj_id


def groups_and_signatures(path: Path) -> Iterator[tuple[int, list[Signature]]]:
    """Each object group with the signatures linked to it (none: unsigned)."""
    held = signatures(path)
    for group in layout(path).groups:
        yield group, [s for s in held if s.group == group]
