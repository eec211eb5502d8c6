"""arm64 under emulation beside amd64: the torch twins built cold, converted to SIFs, and
started (`import torch` in the image under ch-run), in one run.

Needs the Docker engine and both Debian bases (testbed/docker.sh up; testbed/base-image.sh
bookworm and `--arch arm64 bookworm`), qemu registered with binfmt_misc (testbed/qemu.sh up),
the SIF tools (testbed/sif-tools.sh up) and ch-run (testbed/charliecloud.sh up). The twins are
cpu-bookworm-torch (amd64, torch 2.13.0+cpu, Open MPI) and cpu-bookworm-torch-arm64 (torch
2.9.1 from PyPI, no MPI): the same blocks, not the same packages, so the ratios say what
emulation costs the build and a start, not a like-for-like speed of the two CPUs.

Each is built under a name of its own with `--no-cache` (every step runs) and removed after
(see bench/engines.py: a cold build under a recipe's own tag would leave a second chain that
later builds follow). `python bench/emulation.py [--repeat N]` prints the seconds of each
build and conversion, the median of N starts taking turns, and each arm64 / amd64 ratio.
"""

from __future__ import annotations

import argparse
import getpass
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TWINS = {"amd64": "cpu-bookworm-torch", "arm64": "cpu-bookworm-torch-arm64"}
START = ["python", "-c", "import torch; torch.ones(2) + 1"]


def bench_recipe(recipe: str, arch: str, folder: Path) -> tuple[Path, str]:
    """A recipe file extending recipe under a bench name, its lock beside it; (file, tag)."""
    name = f"hvd-bench-emulation-{arch}"
    path = folder / f"{name}.yaml"
    path.write_text(f"extends: {recipe}\nname: {name}\n")
    shutil.copy(ROOT / "recipes" / f"{recipe}.lock", path.with_suffix(".lock"))
    return path, f"{name}:1"


def timed(argv: list[str], what: str) -> float:
    env = {**os.environ, "USER": os.environ.get("USER") or getpass.getuser()}  # ch-run needs it
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"{what} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return seconds


def hvd(*args: str) -> list[str]:
    return [sys.executable, "-m", "hvd_container", *args]


def unpack(sif: Path, target: Path) -> None:
    from hvd_container.containers.sif.reader import read_sif

    offset = read_sif(sif).rootfs_offset
    argv = ["unsquashfs", "-q", "-n", "-o", str(offset), "-d", str(target), str(sif)]
    subprocess.run(argv, check=True, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="starts of each image (default 5)")
    args = parser.parse_args()
    builds: dict[str, float] = {}
    converts: dict[str, float] = {}
    starts: dict[str, list[float]] = {arch: [] for arch in TWINS}
    with tempfile.TemporaryDirectory(prefix="hvd-bench-emulation-", dir="/var/tmp") as tmp:
        folder = Path(tmp)
        trees: dict[str, Path] = {}
        for arch, recipe in TWINS.items():
            path, tag = bench_recipe(recipe, arch, folder)
            try:
                builds[arch] = timed(
                    hvd("build", str(path), "--no-cache", "--progress", "plain"), f"{arch} build"
                )
                sif = folder / f"{arch}.sif"
                converts[arch] = timed(
                    hvd("convert", tag, "--to", "sif", "-o", str(sif)), f"{arch} conversion"
                )
            finally:  # its untagged parents, the build's own layers, go with it
                subprocess.run(["docker", "rmi", tag], capture_output=True)
            trees[arch] = folder / arch
            unpack(sif, trees[arch])
            sif.unlink()
            print(f"{arch}: build {builds[arch]:.0f} s, SIF {converts[arch]:.0f} s", flush=True)
        for _ in range(args.repeat):  # taking turns
            for arch, tree in trees.items():
                starts[arch].append(timed(["ch-run", str(tree), "--", *START], f"{arch} start"))
    median = {arch: statistics.median(s) for arch, s in starts.items()}
    print("| | amd64 | arm64 (emulated) | arm64 / amd64 |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| build, cold (s) | {builds['amd64']:.0f} | {builds['arm64']:.0f} | "
          f"{builds['arm64'] / builds['amd64']:.1f} |")  # fmt: skip
    print(f"| SIF conversion (s) | {converts['amd64']:.0f} | {converts['arm64']:.0f} | "
          f"{converts['arm64'] / converts['amd64']:.1f} |")  # fmt: skip
    print(f"| start, `import torch` (s, median of {args.repeat}) | {median['amd64']:.2f} | "
          f"{median['arm64']:.2f} | {median['arm64'] / median['amd64']:.1f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
