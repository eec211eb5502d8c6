"""The GPU image's figures: build time, image size, SIF conversion time and SIF size.

Builds `gpu-bookworm` (CUDA 13 and NCCL from NVIDIA's wheels, Horovod compiled with NCCL) through
the Docker engine, verifies it (check-build must list NCCL), converts it to a SIF and prints the
figures. Long: about 40-50 min cold on 2 cores; `--no-cache` rebuilds every layer (the Debian
base stays). Needs the Docker engine and the SIF tools (`make services`). Usage:
    python bench/gpu_image.py [--recipe NAME] [--no-cache] [--sif PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str]) -> float:
    started = time.monotonic()
    done = subprocess.run(argv)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}")
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="gpu-bookworm")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--sif", type=Path, default=ROOT / "out" / "gpu-bookworm_1.sif")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "hvd_container"]
    build = [*cli, "build", args.recipe, "--progress", "plain"]
    build_s = timed(build + (["--no-cache"] if args.no_cache else []))
    tag = subprocess.run(
        [*cli, "recipes", "show", args.recipe, "--json"], capture_output=True, text=True, check=True
    )
    image = json.loads(tag.stdout.splitlines()[-1])["image"]
    size = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", image],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    args.sif.parent.mkdir(parents=True, exist_ok=True)
    args.sif.unlink(missing_ok=True)
    convert_s = timed([*cli, "convert", image, "--to", "sif", "-o", str(args.sif)])
    print(f"{'figure':<34} value")
    print(f"{'build (' + ('cold' if args.no_cache else 'as cached') + ')':<34} {build_s:.0f} s")
    print(f"{'image size ' + image:<34} {int(size) / 1e6:.0f} MB")
    print(f"{'SIF conversion':<34} {convert_s:.0f} s")
    print(f"{'SIF size':<34} {args.sif.stat().st_size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
