"""What the benchmarks that launch on the local cluster share (bench/launch.py, startup.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sh(*argv: str) -> None:
    subprocess.run(list(argv), check=True)


def clean_env() -> dict[str, str]:
    """This environment without an allocation's SLURM_* variables, the checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("USER", "root")
    return env


def hvd() -> list[str]:
    return [sys.executable, "-m", "hvd_container"]
