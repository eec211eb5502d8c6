"""Sign a SIF and check its signatures, as Apptainer's `sign` and `verify` do; a pushed image
as cosign does (containers/cosign.py).

Every object group gets a clear-signed message of the sif library's integrity format
(containers/sif/integrity.py), made by the user's key through GnuPG (containers/openpgp.py).
A check passes only when every group is signed, every signature verifies with one of the
trusted keys, the key is the one the signature's descriptor names, and every object of the
group is as signed; each refusal says which and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hvd_container.containers import openpgp
from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif import integrity

from hvd_container.core.errors import Problems, UserError
from hvd_container.core.image_refs import is_registry_ref

if TYPE_CHECKING:
    from hvd_container.containers import cosign


class Refused(Problems):
    """A signature check that did not hold: each problem a line; exit 1, like a failed verify."""

    exit_code = 1


@dataclass(frozen=True)
class Signed:
    """One signature added: the object group it covers, its object ID, the signing key."""

    group: int
    object_id: int
    fingerprint: str


@dataclass(frozen=True)
class GroupCheck:
    """One object group's verdict: the keys whose signatures held, and what refused it."""

    group: int
    signers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.signers) and not self.problems


def sign_sif(path: Path, key: str | None) -> list[Signed]:
    """Sign every object group of the SIF at path with `key` (None: gpg's default key)."""
    found = integrity.layout(path)
    if not found.groups:
        raise UserError(f"{path}: no object group to sign")
    done = []
    for group in found.groups:
        clearsigned, fingerprint = openpgp.clearsign(integrity.message(path, group), key)
        object_id = integrity.append_signature(path, group, clearsigned, fingerprint)
        done.append(Signed(group, object_id, fingerprint))
    return done


def _signature_problems(path: Path, sig: integrity.Signature, keys: Sequence[Path]) -> list[str]:
    where = f"signature {sig.id}"
    if sig.hash_type != integrity.HASH_SHA256:
        return [f"{where}: hash type {sig.hash_type} (known: {integrity.HASH_SHA256}, SHA-256)"]
    try:
        verified = openpgp.verify(sig.message, keys)
    except openpgp.SignatureRefused as refused:
        return [f"{where}: {refused}"]
    if verified.fingerprint != sig.fingerprint:
        return [f"{where}: made by {verified.fingerprint}, its descriptor names {sig.fingerprint}"]
    return [f"{where}: {p}" for p in integrity.mismatches(path, sig.group, verified.text)]


def is_pem_public_key(path: Path) -> bool:
    """Whether the file is a PEM public key (cosign.pub's form, for registry images), not an
    OpenPGP key (for SIF files): a site may trust both kinds in one list."""
    try:
        with path.open("rb") as fh:
            return b"-----BEGIN PUBLIC KEY-----" in fh.read(64 << 10)
    except OSError:
        return False


def check_sif(path: Path, keys: Sequence[Path]) -> list[GroupCheck]:
    """Each object group's verdict against the OpenPGP public keys in these files (PEM keys,
    which check registry images, are passed over)."""
    keys = [key for key in keys if not is_pem_public_key(key)]
    found = integrity.layout(path)
    loose = [d.id for d in found.descriptors if not d.group and d.datatype != fmt.DATA_SIGNATURE]
    checks = []
    for group, sigs in integrity.groups_and_signatures(path):
        signers, problems = [], []
        if not sigs:
            problems.append("not signed")
        for sig in sigs:
            trouble = _signature_problems(path, sig, keys)
            problems += trouble
            if not trouble:
                signers.append(sig.fingerprint)
        checks.append(GroupCheck(group, signers, problems))
    if loose:
        checks.append(
            GroupCheck(0, [], [f"objects {loose} belong to no group: none can be signed"])
        )
    return checks


@dataclass(frozen=True)
class GroupReport:
    """An object group's signatures as `inspect --signatures` shows them: the fingerprints the
    signatures name, and the verdict (None: not checked, no keys were given)."""

    group: int
    fingerprints: list[str]
    verified: bool | None
    problems: list[str]


def report_sif(path: Path, keys: Sequence[Path]) -> list[GroupReport]:
    """Each object group's signatures, checked against the keys in these files if any."""
    held = dict(integrity.groups_and_signatures(path))
    checks = {c.group: c for c in check_sif(path, keys)} if keys else {}
    return [
        GroupReport(
            group,
            [s.fingerprint for s in held.get(group, [])],
            checks[group].ok if group in checks else None,
            checks[group].problems if group in checks else [],
        )
        for group in sorted(held.keys() | checks.keys())
    ]


def is_image_target(target: str) -> bool:
    """Whether sign and inspect take `target` for a pushed image: a registry reference that
    is no file here."""
    return is_registry_ref(target) and not Path(target).exists()


def sign_image(ref: str, key_file: Path) -> cosign.Signed:
    """Sign the pushed image ref by its digest with the PEM private key in key_file."""
    # the registry's client and cryptography: about 40 ms that a SIF's signing never pays
    from hvd_container.containers import cosign

    return cosign.sign_image(ref, key_file)


def image_key(key_file: Path) -> None:
    """Read the private key a pushed image would be signed with: a key that cannot sign is
    refused before a build or a push, not after."""
    # the registry's client and cryptography: about 40 ms that a SIF's signing never pays
    from hvd_container.containers import cosign

    cosign.load_private_key(key_file)


def check_image(ref: str, keys: Sequence[Path]) -> cosign.ImageCheck:
    """The signatures beside the pushed image ref names now, checked against the PEM public
    keys among `keys` (OpenPGP keys are for SIF files and are passed over)."""
    # the registry's client and cryptography: about 40 ms that a SIF's check never pays
    from hvd_container.containers import cosign

    pem = [key for key in keys if is_pem_public_key(key)]
    if keys and not pem:
        raise UserError(
            f"none of the trusted keys is a PEM public key, which checks a registry image's "
            f"signature (cosign.pub's form): {', '.join(map(str, keys))}"
        )
    return cosign.check_image(ref, pem)
