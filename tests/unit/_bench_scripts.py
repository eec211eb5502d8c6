"""The bench scripts are programs beside the package, not modules of it: a test loads the one it
tests from its file, anew each time (a test may change its globals)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/NAME (`dryrun.py`, `_ranks.py`) as the module bench_<its stem>."""
    path = BENCH / name
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem.lstrip('_')}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    return module
