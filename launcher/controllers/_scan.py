"""What a training script says about the controller it is written for: a text scan of the
file, never an import (the script's packages need not be installed here).

Each family is a list of (pattern, what it shows) pairs; the first match is the evidence named
in the dry run, the batch script and --json. A script that is not a .py file, or that cannot be
read here (a path that exists only on the cluster), tells nothing: `read` says which.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

# `from m import x`, `from m.sub import x`, `import m`, `import os, m.sub as y`
_FROM = r"^[ \t]*(?:from[ \t]+{m}(?:\.[\w.]+)?[ \t]+import|import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*{m}\b)"

LIGHTNING = [
    (re.compile(_FROM.format(m="(?:lightning|pytorch_lightning)"), re.M), "imports Lightning")
]
HOROVOD = [(re.compile(_FROM.format(m="horovod"), re.M), "imports horovod")]
TORCH_DISTRIBUTED = [
    (re.compile(r"\binit_process_group[ \t]*\("), "calls init_process_group"),
    (re.compile(_FROM.format(m="accelerate"), re.M), "uses Hugging Face Accelerate"),
    (
        re.compile(r"^[ \t]*from[ \t]+transformers\b[^\n]*\b(?:Trainer|TrainingArguments)\b", re.M),
        "uses the transformers Trainer",
    ),
    (
        re.compile(r"""environ(?:\[|\.get\()[ \t]*['"](?:LOCAL_RANK|WORLD_SIZE)['"]"""),
        "reads torchrun's LOCAL_RANK/WORLD_SIZE",
    ),
    (re.compile(_FROM.format(m=r"torch\.distributed"), re.M), "imports torch.distributed"),
]
ACCELERATE = TORCH_DISTRIBUTED[1:2]


@dataclass(frozen=True)
class Script:
    """A script as read here: its text, or why there is none."""

    text: str | None
    why_not: str = ""  # when text is None: "not a Python script", "not readable here"

    def shows(self, family: list[tuple[re.Pattern[str], str]]) -> str | None:
        """What in the text shows the family (the first match), or None."""
        if self.text is None:
            return None
        for pattern, what in family:
            if pattern.search(self.text):
                return what
        return None


def read(script: str) -> Script:
    path = Path(script)
    if path.suffix != ".py":
        return Script(None, "not a Python script")
    try:
        return Script(path.read_text(errors="replace"))
    except OSError:
        return Script(None, "not readable here")


def near_name(script: str) -> str | None:
    """For a .py script that is not here, the .py file beside it whose name is closest (a
    typo: mulitnode.py for multinode.py), or None."""
    path = Path(script)
    if path.suffix != ".py" or path.exists():
        return None
    try:
        beside = sorted(p.name for p in path.parent.glob("*.py") if p.is_file())
    except OSError:
        return None
    close = difflib.get_close_matches(path.name, beside, n=1, cutoff=0.75)
    return str(path.with_name(close[0])) if close else None
