"""A cache of validated site-profile data, so `run --dry-run` need not import PyYAML.

Keyed by the file's absolute path, mtime and size; holds only data that validated, of files
that still exist. Any problem reading or writing the cache just means a cache miss.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hvd-container" / "site-profiles.json"


def _stamp(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _read_all() -> dict[str, Any]:
    try:
        data = json.loads(cache_file().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def get(path: Path) -> dict[str, Any] | None:
    """The cached data of path if the file has not changed since it was stored."""
    stamp = _stamp(path)
    entry = _read_all().get(str(path.resolve()))
    if stamp is None or not isinstance(entry, dict) or entry.get("stamp") != stamp:
        return None
    data = entry.get("data")
    return data if isinstance(data, dict) else None


def put(path: Path, data: dict[str, Any]) -> None:
    """Remember validated data of path (best effort)."""
    stamp = _stamp(path)
    if stamp is None:
        return
    # entries of files that are gone (an old checkout, a deleted profile) are dropped
    entries = {key: entry for key, entry in _read_all().items() if os.path.exists(key)}
    entries[str(path.resolve())] = {"stamp": stamp, "data": data}
    target = cache_file()
    try:
        from hvd_container.core.atomic import write_text

        target.parent.mkdir(parents=True, exist_ok=True)
        write_text(target, json.dumps(entries))
    except (OSError, TypeError, ValueError):
        pass
