"""Is a training script a PyTorch Lightning one? A cheap text scan, no import.

A script that cannot be read here (a path that exists only on the cluster) is judged by the
image instead: Lightning installed and Horovod not means a Lightning script.
"""

from __future__ import annotations

import re
from pathlib import Path

from hvd_container.launcher.facts import ImageFacts

_IMPORT = re.compile(
    r"^\s*(?:from\s+(?:lightning|pytorch_lightning)(?:\.[\w.]+)?\s+import|import\s+(?:lightning|pytorch_lightning)\b)",
    re.MULTILINE,
)


def scan_script(script: str | Path) -> bool | None:
    """True when the file imports lightning or pytorch_lightning; None if unreadable."""
    path = Path(script)
    if path.suffix != ".py":
        return False  # a program, not a Python script
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    return bool(_IMPORT.search(text))


def uses_lightning(script: str | Path) -> bool:
    """True when the file imports lightning or pytorch_lightning; False if unreadable."""
    return scan_script(script) is True


def lightning_script(script: str, facts: ImageFacts | None) -> tuple[bool, str | None]:
    """(is it a Lightning script, why, when that was decided from the image and not the file)."""
    found = scan_script(script)
    if found is not None:
        return found, None
    if facts is not None and facts.lightning and facts.horovod is False:
        return True, f"not readable here; {facts.source} has Lightning and no Horovod"
    return False, None
