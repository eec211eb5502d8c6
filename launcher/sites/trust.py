"""Profiles the user has trusted: `hvd-container sites trust FILE` records the file's digest;
a changed file is untrusted again (as direnv and an editor's workspace trust work).

A trusted profile, like a built-in one, may set what the guard (launcher/guard.py) allows only
to those: a site's NCCL plugin path, a bind under /opt, a runtime flag the tool does not know.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import UserError
from hvd_container.core.files import private_folder, untrusted_because

STORE = "trusted-sites.json"


def digest(path: Path) -> str:
    try:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc})") from None


class TrustStore:
    """{resolved path: digest} in FOLDER/trusted-sites.json, a file of the user's only."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / STORE

    def _read(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
        why = untrusted_because(self.path)
        if why is not None:
            raise UserError(
                f"{self.path}: refused: {why}; it says which profiles you trust, so it must be "
                "yours and writable by you only (chmod go-w, or remove it and trust again)"
            )
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"{self.path}: not the trust list this tool writes ({exc}): remove it") from None  # fmt: skip
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise UserError(f"{self.path}: not the trust list this tool writes: remove it")
        return data

    def trusts(self, path: Path) -> bool:
        recorded = self._read().get(str(path.resolve()))
        return recorded is not None and path.is_file() and recorded == digest(path)

    def add(self, paths: list[Path]) -> None:
        data = self._read()
        for path in paths:
            data[str(path.resolve())] = digest(path)
        self.folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        private_folder(self.folder.parent, self.folder.name, "the list of profiles you trust")
        write_text(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n", mode=0o600)

    def remove(self, path: Path) -> bool:
        data = self._read()
        gone = data.pop(str(path.resolve()), None) is not None
        if gone:
            write_text(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n", mode=0o600)
        return gone
