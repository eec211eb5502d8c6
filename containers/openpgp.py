"""OpenPGP clear-signed messages through GnuPG (`gpg`), the format SIF signatures use.

Signing uses the user's own keyring (GNUPGHOME as gpg reads it) and a key the user names.
Verifying imports only the given public keys into a new, private GnuPG home and asks gpg there:
a message verifies only when one of those keys made it, whatever the user's keyring trusts.
The verdict comes from gpg's machine-readable status lines (doc/DETAILS in GnuPG's sources).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hvd_container.core.errors import UserError, brief

_TIMEOUT_S = 120


@dataclass(frozen=True)
class Verified:
    """A message whose signature a trusted key made: the text it covers and that key."""

    text: bytes
    fingerprint: str  # the primary key's, upper-case hex


class SignatureRefused(UserError):
    """The signature is not one of the trusted keys', or does not match its message."""


def _gpg() -> str:
    found = shutil.which("gpg")
    if found is None:
        raise UserError(
            "gpg not found on PATH: signing and checking SIF signatures need GnuPG "
            "(Debian/Ubuntu: apt install gpg; RHEL: dnf install gnupg2)"
        )
    return found


def _run(argv: list[str], data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            argv, input=data, capture_output=True, timeout=_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"gpg did not answer in {_TIMEOUT_S} s ({' '.join(argv[1:4])} ...)"
        ) from None


def _last_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return brief(lines[-1], 200) if lines else "no message"


def _status(stdout: bytes) -> list[list[str]]:
    return [
        line.split()[1:]
        for line in stdout.decode(errors="replace").splitlines()
        if line.startswith("[GNUPG:] ")
    ]


def clearsign(message: bytes, key: str | None) -> tuple[bytes, str]:
    """(the clear-signed message, the signing key's primary fingerprint) made with `key` (a key
    ID, fingerprint or user ID in the user's keyring; None: gpg's default key)."""
    if key is not None and (not key.strip() or not key.isprintable()):
        raise UserError(
            f"--key {key!r}: not a key name (allowed: a fingerprint, key ID or user ID as gpg "
            "takes them, one line of printable text)"
        )
    gpg = _gpg()
    argv = [gpg, "--batch", "--armor", "--digest-algo", "SHA256", "--clearsign"]
    if key is not None:
        argv[1:1] = ["--local-user", key]
    done = _run(argv, message)
    who = f"key {key!r}" if key else "gpg's default key"
    if done.returncode != 0 or not done.stdout:
        raise UserError(f"gpg could not sign with {who}: {_last_line(done.stderr)}")
    check = _run([gpg, "--batch", "--status-fd", "1", "--verify"], done.stdout)
    valid = [s for s in _status(check.stdout) if s[:1] == ["VALIDSIG"]]
    if check.returncode != 0 or len(valid) != 1:
        raise UserError(f"gpg signed with {who} but cannot verify it: {_last_line(check.stderr)}")
    return done.stdout, valid[0][-1].upper()


@contextmanager
def _private_home() -> Iterator[Path]:
    # short path: gpg-agent's socket lives in the home when /run/user has no place for it
    home = Path(tempfile.mkdtemp(prefix="hvd-gpg-"))
    try:
        yield home
    finally:
        gpgconf = shutil.which("gpgconf")
        if gpgconf is not None:
            _run([gpgconf, "--homedir", str(home), "--kill", "all"])
        shutil.rmtree(home, ignore_errors=True)


def _import(home: Path, keys: Sequence[Path]) -> None:
    if not keys:
        raise UserError("no trusted keys given: name a public key file (--keyring FILE)")
    for key in keys:
        if not key.is_file():
            raise UserError(f"{key}: no such key file (expected an OpenPGP public key)")
        argv = [_gpg(), "--homedir", str(home), "--batch", "--status-fd", "1", "--import", str(key)]
        done = _run(argv)
        imported = [s for s in _status(done.stdout) if s[:1] == ["IMPORT_OK"]]
        if not imported:
            raise UserError(f"{key}: no OpenPGP public key in it ({_last_line(done.stderr)})")


def verify(clearsigned: bytes, keys: Sequence[Path]) -> Verified:
    """The text of a clear-signed message that one of the keys in these files signed; else
    SignatureRefused saying why (another key, a changed message, not a signature)."""
    with _private_home() as home:
        _import(home, keys)
        out = home / "text"
        argv = [_gpg(), "--homedir", str(home), "--batch", "--status-fd", "1", "--output",
                str(out), "--decrypt"]  # fmt: skip
        done = _run(argv, clearsigned)
        status = _status(done.stdout)
        words = {s[0] for s in status if s}
        valid = [s for s in status if s[:1] == ["VALIDSIG"]]
        if done.returncode == 0 and len(valid) == 1 and not words & {"BADSIG", "ERRSIG"}:
            return Verified(out.read_bytes(), valid[0][-1].upper())
    if "NO_PUBKEY" in words:
        key_id = next(s[1] for s in status if s[:1] == ["NO_PUBKEY"])
        raise SignatureRefused(f"signed by key {key_id}, which is not among the trusted keys")
    if "BADSIG" in words:
        raise SignatureRefused("the signature does not match the signed message (changed)")
    if "NODATA" in words or not words:
        raise SignatureRefused("not an OpenPGP clear-signed message")
    raise SignatureRefused(f"gpg refused the signature: {_last_line(done.stderr)}")
