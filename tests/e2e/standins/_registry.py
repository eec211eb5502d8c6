"""Shared by the stand-ins: ask the real local registry whether an image reference exists."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"


def split_ref(ref: str) -> tuple[str, str, str]:
    """host, repository, tag of `host:port/repo:tag`."""
    host, _, rest = ref.partition("/")
    repository, _, tag = rest.rpartition(":")
    if not repository:
        repository, tag = rest, "latest"
    return host, repository, tag


def manifest_digest(ref: str) -> str | None:
    """The manifest's digest if the registry has ref, else None."""
    host, repository, tag = split_ref(ref)
    request = urllib.request.Request(
        f"http://{host}/v2/{repository}/manifests/{tag}", headers={"Accept": MANIFEST_V2}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
            return response.headers.get("Docker-Content-Digest") or (
                "sha256:" + hashlib.sha256(body).hexdigest()
            )
    except (urllib.error.URLError, OSError):
        return None


def state_file(variable: str) -> Path:
    directory = Path(os.environ[variable])
    directory.mkdir(parents=True, exist_ok=True)
    return directory / "state.json"


def load(variable: str) -> dict[str, Any]:
    path = state_file(variable)
    return json.loads(path.read_text()) if path.exists() else {}


def save(variable: str, state: dict[str, Any]) -> None:
    state_file(variable).write_text(json.dumps(state))


def log_call(variable: str, argv: list[str]) -> None:
    with (state_file(variable).parent / "calls.log").open("a") as fh:
        fh.write(" ".join(argv) + "\n")
