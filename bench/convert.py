"""Benchmark the native SIF conversion against the bare compression step it is built around.

    python bench/convert.py [--image TAG] [--compression gzip] [--threads N] [--workdir DIR]
    python bench/convert.py --levels [--image TAG] [--threads N] [--workdir DIR]

In one run, on the same image and the same disk:
  bare:   docker export CID | tar2sqfs (the native path's flags) out.sqfs   (the unavoidable work)
  native: hvd-container's convert_image_to_sif (export -> filter -> tar2sqfs -> SIF header)
and prints both times and their ratio (target <= 1.10), the peak extra disk used in the
output directory during the native conversion relative to the final SIF (target <= 1.10),
and the peak memory of the converting process and of its tar2sqfs child.

--levels: for gzip and zstd, the bare step at tar2sqfs's own level (gzip 9, zstd 15, as
mksquashfs) and at the level the native path writes (sif/writer.py's COMPRESSION_LEVELS), side
by side on the same image: time and size of each, and their ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _dir_usage(path: Path) -> int:
    total = 0
    for entry in os.scandir(path):
        with contextlib.suppress(FileNotFoundError):
            total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in task.read_text().split()]
    return found


def _status_kb(pid: int | str, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    """Every 20 ms: disk used in a directory, and the peak RSS of our tar2sqfs children."""

    def __init__(self, directory: Path) -> None:
        super().__init__(daemon=True)
        self.directory = directory
        self.stop = threading.Event()
        self.peak_disk = 0
        self.peak_child_kb = 0

    def run(self) -> None:
        me = os.getpid()
        while not self.stop.is_set():
            self.peak_disk = max(self.peak_disk, _dir_usage(self.directory))
            for child in _children(me):
                self.peak_child_kb = max(self.peak_child_kb, _status_kb(child, "VmHWM"))
            time.sleep(0.02)


def _docker() -> str:
    return shutil.which("docker") or "docker"


# tar2sqfs's (and mksquashfs's) own levels: what the native path wrote before it chose its own
TOOL_LEVELS = {"gzip": 9, "zstd": 15}


def bare(
    image: str,
    out: Path,
    compression: str,
    threads: int,
    mtime: int | None = None,
    level: int | None = None,
) -> float:
    """docker export | tar2sqfs, timed from export start to tar2sqfs exit."""
    from hvd_container.containers.sif.writer import tar2sqfs_argv

    # The native path's own tar2sqfs flags, so that the ratio compares the same work.
    argv = tar2sqfs_argv(
        str(out),
        compression=compression,
        threads=threads,
        mtime=int(time.time()) if mtime is None else mtime,
        level=level,
    )
    cid = subprocess.run([_docker(), "create", "--entrypoint", "/", image], capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    try:
        started = time.monotonic()
        export = subprocess.Popen([_docker(), "export", cid], stdout=subprocess.PIPE)
        squash = subprocess.run(argv, stdin=export.stdout, check=True)
        assert export.stdout is not None
        export.stdout.close()
        export.wait()
        elapsed = time.monotonic() - started
        assert squash.returncode == 0 and export.returncode == 0
        return elapsed
    finally:
        subprocess.run([_docker(), "rm", "-f", cid], capture_output=True)


def warm_up(image: str) -> None:
    """Read the image once so that neither measured run pays for a cold page cache."""
    cid = subprocess.run([_docker(), "create", "--entrypoint", "/", image], capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    try:
        subprocess.run([_docker(), "export", cid], stdout=subprocess.DEVNULL, check=True)
    finally:
        subprocess.run([_docker(), "rm", "-f", cid], capture_output=True)


def compare_levels(image: str, workdir: Path, threads: int) -> None:
    """The bare step at tar2sqfs's level and at ours, per compressor, one after the other."""
    from hvd_container.containers.sif.writer import COMPRESSION_LEVELS

    out = workdir / "level.sqfs"
    for compression, ours in COMPRESSION_LEVELS.items():
        theirs = TOOL_LEVELS[compression]
        figures = []
        for level in (theirs, ours):
            seconds = bare(image, out, compression, threads, level=level)
            figures.append((seconds, out.stat().st_size))
            out.unlink()
            print(
                f"{compression} level {level:<2}    {seconds:6.1f} s  -> {figures[-1][1] / 1e6:.0f} MB"
            )
        (t_theirs, b_theirs), (t_ours, b_ours) = figures
        print(
            f"{compression} {ours} vs {theirs}      time ratio {t_ours / t_theirs:.2f}, "
            f"size ratio {b_ours / b_theirs:.3f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", help="local Docker image (default: the cpu-bookworm recipe's)")
    parser.add_argument("--compression", default="gzip", choices=["gzip", "zstd", "xz"])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--workdir", type=Path, default=None, help="where outputs go (a disk)")
    parser.add_argument(
        "--levels", action="store_true", help="tar2sqfs's compression levels against ours"
    )
    args = parser.parse_args(argv)

    from hvd_container.containers.convert.sif_native import convert_image_to_sif

    image = args.image
    if image is None:
        from hvd_container.containers.recipe_loader import load_recipe

        image = load_recipe("cpu-bookworm").image_tag
    import docker

    size = docker.from_env().images.get(image).attrs.get("Size", 0)
    workdir = Path(tempfile.mkdtemp(prefix="hvd-bench-convert-", dir=args.workdir))
    try:
        print(f"image            {image} (rootfs {size / 1e6:.0f} MB uncompressed)")
        warm_up(image)
        if args.levels:
            print(f"bare step only, {args.threads} jobs; outputs in {workdir}")
            compare_levels(image, workdir, args.threads)
            return 0
        print(f"compressor       {args.compression}, {args.threads} jobs; outputs in {workdir}")
        bare_out = workdir / "bare.sqfs"
        bare_s = bare(image, bare_out, args.compression, args.threads)
        bare_size = bare_out.stat().st_size
        bare_out.unlink()
        print(
            f"bare compression {bare_s:6.1f} s  docker export | tar2sqfs -> {bare_size / 1e6:.0f} MB"
        )

        native_dir = workdir / "native"
        native_dir.mkdir()
        sampler = Sampler(native_dir)
        sampler.start()
        started = time.monotonic()
        result = convert_image_to_sif(
            image, native_dir / "image.sif", compression=args.compression, threads=args.threads
        )
        native_s = time.monotonic() - started
        sampler.stop.set()
        sampler.join()
        sampler.peak_disk = max(sampler.peak_disk, _dir_usage(native_dir))
        ratio = native_s / bare_s
        print(
            f"native convert   {native_s:6.1f} s  -> SIF {result.size / 1e6:.0f} MB "
            f"(header placed by {result.shift_method})"
        )
        print(
            f"time ratio       {ratio:.3f}  (target <= 1.10) {'OK' if ratio <= 1.10 else 'MISSED'}"
        )
        disk_ratio = sampler.peak_disk / result.size
        print(
            f"peak extra disk  {sampler.peak_disk / 1e6:.0f} MB = {disk_ratio:.3f} x SIF  "
            f"(target <= 1.10) {'OK' if disk_ratio <= 1.10 else 'MISSED'}"
        )
        print(
            f"peak memory      converter {_status_kb('self', 'VmHWM') / 1024:.0f} MB, "
            f"tar2sqfs {sampler.peak_child_kb / 1024:.0f} MB"
        )
        return 0 if ratio <= 1.10 and disk_ratio <= 1.10 else 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
