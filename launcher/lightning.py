"""Is a training script a PyTorch Lightning one? A cheap text scan, no import."""

from __future__ import annotations

import re
from pathlib import Path

_IMPORT = re.compile(
    r"^\s*(?:from\s+(?:lightning|pytorch_lightning)(?:\.[\w.]+)?\s+import|import\s+(?:lightning|pytorch_lightning)\b)",
    re.MULTILINE,
)


def uses_lightning(script: str | Path) -> bool:
    """True when the file imports lightning or pytorch_lightning; False if unreadable."""
    path = Path(script)
    if path.suffix != ".py":
        return False
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return bool(_IMPORT.search(text))
