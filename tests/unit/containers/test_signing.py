"""SIF signatures in the sif library's integrity format, made and checked with the real gpg.

The outside verifier (Sylabs' own library) is asked in tests/e2e/test_sif_signatures.py; here
the tool's own check is held to each way a signed SIF can stop being what was signed.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest
from _fakes import write_sif
from _gpg_keys import Key
from hvd_container.containers import openpgp, signing
from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif import integrity
from hvd_container.containers.sif.layout import DataObject, sif_prefix
from hvd_container.containers.sif.reader import read_sif

from hvd_container.core.errors import UserError

PAYLOAD = b"hsqs" + bytes(range(256)) * 40


def a_sif(path: Path) -> Path:
    objs = [
        DataObject(fmt.DATA_DEFFILE, b"bootstrap: docker-daemon\nfrom: x:1\n"),
        DataObject(fmt.DATA_LABELS, b'{"maintainer": "someone"}', name="labels.json"),
    ]
    prefix = sif_prefix(objs, partition_size=len(PAYLOAD), arch="amd64", created=1700000000,
                        image_id=uuid.UUID(int=11))  # fmt: skip
    path.write_bytes(prefix + PAYLOAD)
    return path


def signed(tmp_path: Path, signer: Key) -> Path:
    sif = a_sif(tmp_path / "x.sif")
    done = signing.sign_sif(sif, signer.fingerprint)
    assert [(s.group, s.object_id, s.fingerprint) for s in done] == [(1, 4, signer.fingerprint)]
    return sif


def problems(sif: Path, *keys: Path) -> list[str]:
    return [p for check in signing.check_sif(sif, list(keys)) for p in check.problems]


def patch(sif: Path, offset: int, data: bytes) -> None:
    with open(sif, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def descriptor(sif: Path, obj_id: int) -> integrity.RawDescriptor:
    return next(d for d in integrity.layout(sif).descriptors if d.id == obj_id)


def test_a_signature_object_as_the_library_writes_it(tmp_path: Path, signer: Key) -> None:
    sif = signed(tmp_path, signer)
    sig = descriptor(sif, 4)
    assert (sig.datatype, sig.group, sig.link) == (fmt.DATA_SIGNATURE, 0, 1 | fmt.GROUP_MASK)
    hash_type, entity = integrity.SIGNATURE_EXTRA.unpack_from(sig.extra)
    assert hash_type == 1 and entity.rstrip(b"\0").hex().upper() == signer.fingerprint
    info = read_sif(sif)  # the reader still takes the file; the partition did not move
    assert info.rootfs_size == len(PAYLOAD)
    assert [d.describe() for d in info.descriptors][-1] == "Signature"
    header = fmt.HEADER.unpack(sif.read_bytes()[: fmt.HEADER.size])
    assert header[7] == fmt.DESCRIPTOR_CAPACITY - 4  # one descriptor fewer free
    assert header[11] + header[12] == sif.stat().st_size  # the data area runs to the end


def test_the_message_is_the_integrity_formats_json_with_digests_of_what_is_there(
    tmp_path: Path, signer: Key
) -> None:
    sif = signed(tmp_path, signer)
    clear = integrity.signatures(sif)[0].message
    assert clear.startswith(b"-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n")
    text = openpgp.verify(clear, [signer.public]).text
    metadata = json.loads(text)
    assert metadata["version"] == 1
    assert [o["relativeId"] for o in metadata["objects"]] == [0, 1, 2]
    partition = metadata["objects"][2]["objectDigest"]
    assert partition == "sha256:" + hashlib.sha256(PAYLOAD).hexdigest()
    head = sif.read_bytes()[:64]  # launch script, magic, version, arch, ID: all but the arch
    assert (
        metadata["header"]["digest"]
        == "sha256:" + hashlib.sha256(head[:45] + head[48:64]).hexdigest()
    )


def test_a_signed_sif_holds_against_the_signers_key_only(
    tmp_path: Path, signer: Key, keys: tuple[Key, Key]
) -> None:
    sif = signed(tmp_path, signer)
    stranger = keys[1]
    checks = signing.check_sif(sif, [signer.public])
    assert [(c.group, c.signers, c.problems, c.ok) for c in checks] == [
        (1, [signer.fingerprint], [], True)
    ]
    assert problems(sif, stranger.public) == [
        f"signature 4: signed by key {signer.fingerprint[-16:]}, which is not among the "
        "trusted keys"
    ]
    assert problems(sif, stranger.public, signer.public) == []


def test_a_partition_changed_after_signing_is_refused(tmp_path: Path, signer: Key) -> None:
    sif = signed(tmp_path, signer)
    patch(sif, read_sif(sif).rootfs_offset + 100, b"\xff")
    assert problems(sif, signer.public) == ["signature 4: object 3's data changed"]


def test_a_changed_descriptor_or_header_is_refused(tmp_path: Path, signer: Key) -> None:
    sif = signed(tmp_path, signer)
    labels = descriptor(sif, 2)
    name_at = fmt.DESCRIPTORS_OFFSET + labels.slot * fmt.DESCRIPTOR.size + 73
    patch(sif, name_at, b"other.json\0")
    assert problems(sif, signer.public) == ["signature 4: object 2's descriptor changed"]
    (tmp_path / "again").mkdir()
    sif = signed(tmp_path / "again", signer)
    patch(sif, 48, bytes(16))  # the file's ID
    assert problems(sif, signer.public) == [
        "signature 4: the header (its launch script, magic, version or ID) changed"
    ]


def test_an_object_added_to_the_group_after_signing_is_refused(tmp_path: Path, signer: Key) -> None:
    sif = signed(tmp_path, signer)
    integrity.append_signature(sif, 1, b"x", signer.fingerprint)  # a 5th object, made generic
    at = fmt.DESCRIPTORS_OFFSET + descriptor(sif, 5).slot * fmt.DESCRIPTOR.size
    patch(sif, at, fmt.DATA_GENERIC.to_bytes(4, "little"))
    patch(sif, at + 9, (1 | fmt.GROUP_MASK).to_bytes(4, "little") + bytes(4))  # group 1, no link
    assert problems(sif, signer.public) == [
        "signature 4: group 1 holds objects [1, 2, 3, 5], the signature covers [1, 2, 3]"
    ]


def test_a_descriptor_naming_another_key_than_the_signer_is_refused(
    tmp_path: Path, signer: Key, keys: tuple[Key, Key]
) -> None:
    sif = signed(tmp_path, signer)
    sig = descriptor(sif, 4)
    extra_at = fmt.DESCRIPTORS_OFFSET + sig.slot * fmt.DESCRIPTOR.size + 201
    patch(sif, extra_at + 4, bytes.fromhex(keys[1].fingerprint))
    assert problems(sif, signer.public) == [
        f"signature 4: made by {signer.fingerprint}, its descriptor names {keys[1].fingerprint}"
    ]


def test_a_signature_whose_text_was_edited_is_refused(tmp_path: Path, signer: Key) -> None:
    sif = signed(tmp_path, signer)
    sig = descriptor(sif, 4)
    clear = sif.read_bytes()[sig.offset : sig.offset + sig.size]
    at = clear.index(b'"version":1')
    patch(sif, sig.offset + at, b'"version":2')
    assert problems(sif, signer.public) == [
        "signature 4: the signature does not match the signed message (changed)"
    ]
    patch(sif, sig.offset, b"not a signature at all\n".ljust(sig.size, b" "))
    assert problems(sif, signer.public) == ["signature 4: not an OpenPGP clear-signed message"]


def test_an_unsigned_sif_is_refused_and_nothing_passes_without_keys(
    tmp_path: Path, signer: Key
) -> None:
    sif = a_sif(tmp_path / "x.sif")
    assert problems(sif, signer.public) == ["not signed"]
    with pytest.raises(UserError, match="no trusted keys given"):
        openpgp.verify(b"", [])
    reports = signing.report_sif(sif, [])
    assert [(r.group, r.fingerprints, r.verified) for r in reports] == [(1, [], None)]


def test_a_failed_signing_leaves_the_file_as_it_was(tmp_path: Path, signer: Key) -> None:
    sif = a_sif(tmp_path / "x.sif")
    before = sif.read_bytes()
    with pytest.raises(UserError, match="^gpg could not sign with key 'nobody@example.org': "):
        signing.sign_sif(sif, "nobody@example.org")
    with pytest.raises(UserError, match=r"^--key 'a\\nb': not a key name \(allowed: "):
        signing.sign_sif(sif, "a\nb")
    assert sif.read_bytes() == before


def test_keyring_files_that_hold_no_key_are_named(tmp_path: Path, signer: Key) -> None:
    sif = signed(tmp_path, signer)
    junk = tmp_path / "junk.asc"
    junk.write_text("hello\n")
    with pytest.raises(UserError, match=f"^{junk}: no OpenPGP public key in it"):
        signing.check_sif(sif, [junk])
    with pytest.raises(UserError, match="no such key file"):
        signing.check_sif(sif, [tmp_path / "none.asc"])


def test_a_full_descriptor_table_is_a_one_line_error(tmp_path: Path, signer: Key) -> None:
    sif = write_sif(tmp_path / "x.sif")
    for _ in range(fmt.DESCRIPTOR_CAPACITY - 2):
        integrity.append_signature(sif, 1, b"x", signer.fingerprint)
    before = sif.read_bytes()
    with pytest.raises(UserError, match="no free descriptor left for a signature"):
        signing.sign_sif(sif, signer.fingerprint)
    assert sif.read_bytes() == before
