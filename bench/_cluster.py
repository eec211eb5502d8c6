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


# where the README's commands leave the CPU recipe's SIF: `make demo` converts in out/demo/,
# `make sif` (and `make bench`) in out/
DEFAULT_IMAGES = (ROOT / "out" / "demo" / "cpu-bookworm_1.sif", ROOT / "out" / "cpu-bookworm_1.sif")


def default_image() -> str:
    """The newest SIF the README's commands made (the first place when there is none yet)."""
    found = [p for p in DEFAULT_IMAGES if p.is_file()]
    return str(max(found, key=lambda p: p.stat().st_mtime) if found else DEFAULT_IMAGES[0])


def image_or_exit(path: str, script: str) -> Path:
    """The SIF to launch, or exit 2 in one line that says which command makes one."""
    image = Path(path).resolve()
    if not image.is_file():
        where = " or ".join(str(p.relative_to(ROOT)) for p in DEFAULT_IMAGES)
        print(
            f"{script}: {image}: no such file (`make demo` or `make sif` makes {where}; or pass --image)",
            file=sys.stderr,
        )
        sys.exit(2)
    return image


def hvd() -> list[str]:
    return [sys.executable, "-m", "hvd_container"]
