"""Throw-away OpenPGP keys made by the real gpg, for the signing tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Key:
    home: Path
    public: Path
    fingerprint: str


def new_key(name: str) -> Key:
    # short path: gpg-agent's socket may live in the home
    home = Path(tempfile.mkdtemp(prefix="gpgt-"))
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(
        ["gpg", "--batch", "--passphrase", "", "--quick-gen-key", f"{name} <{name}@example.org>",
         "ed25519", "sign", "never"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    public = home / "public.asc"
    exported = subprocess.run(["gpg", "--batch", "--armor", "--export"], env=env, check=True,
                              capture_output=True).stdout  # fmt: skip
    public.write_bytes(exported)
    listing = subprocess.run(["gpg", "--batch", "--with-colons", "--list-keys"], env=env,
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
    fpr = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    return Key(home, public, fpr)


def drop_key(key: Key) -> None:
    """Stop the GnuPG home's agent and remove the home."""
    subprocess.run(["gpgconf", "--homedir", str(key.home), "--kill", "all"], check=False)
    shutil.rmtree(key.home, ignore_errors=True)


@pytest.fixture(scope="session")
def keys() -> Iterator[tuple[Key, Key]]:
    made = (new_key("signer"), new_key("stranger"))
    yield made
    for key in made:
        drop_key(key)


@pytest.fixture
def signer(keys: tuple[Key, Key], monkeypatch: pytest.MonkeyPatch) -> Key:
    monkeypatch.setenv("GNUPGHOME", str(keys[0].home))
    return keys[0]
