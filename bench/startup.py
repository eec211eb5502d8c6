"""Start-up at scale: from `hvd-container run` to every rank's first line, at 2, 4 and 8 nodes.

Four ways for Charliecloud to run the CPU image, side by side in one run (the modes take
turns, so drift in the machine's load hits all alike):
  - unpacked: the image unpacked once into the cache (launcher/runtimes/charliecloud.py), warm;
  - mounted: the SIF's root filesystem mounted with squashfuse at the partition's offset, no
    unpack at all (the directory is given to `run --image`);
  - sqfs: that root filesystem as a SquashFS file on the shared file system, which ch-run
    mounts on each node where it lies;
  - staged: the same file with `run --stage`, copied by sbcast to each node's /tmp first.
and, from the unpacked copy, the same start-up with torch.distributed (`--controller torch`,
`init_process_group()` over gloo) next to Horovod's `hvd.init()`.
Each rank prints the wall-clock time its Python started and the time its init returned;
the figures are the last rank's, minus the moment `hvd-container run` was started (a batch job
submitted and followed, as a user runs it). The local cluster is restarted with each node
count (testbed/slurm.sh up --nodes N) and left at 2 nodes. Usage:
    python bench/startup.py [--image SIF] [--nodes 2 4 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from _cluster import (  # bench/: the script's folder, on sys.path
    ROOT,
    clean_env,
    default_image,
    image_or_exit,
    sh,
)

# at the top of the script: Python is running; after hvd.init(): every rank found the others
FIRST = """\
import time
started = time.time()
import os, socket
import torch, horovod.torch as hvd
hvd.init()
print(f"STARTUP {hvd.rank()} {socket.gethostname()} {started:.3f} {time.time():.3f}", flush=True)
"""
# the same for torch.distributed (--controller torch): init_process_group() over gloo
FIRST_TORCH = """\
import time
started = time.time()
import os, socket
import torch, torch.distributed as dist
dist.init_process_group("gloo")
print(f"STARTUP {dist.get_rank()} {socket.gethostname()} {started:.3f} {time.time():.3f}", flush=True)
"""
LINE = re.compile(r"^STARTUP (\d+) (\S+) ([0-9.]+) ([0-9.]+)$", re.M)
STAGED = re.compile(
    r"^hvd-container stage: \S+ copied to (/tmp/hvd-stage-\S+) on the job's nodes$", re.M
)


@contextlib.contextmanager
def mounted(sif: Path) -> Iterator[Path]:
    """The SIF's root filesystem through squashfuse, read-only, at its offset."""
    sys.path.insert(0, str(ROOT))
    from hvd_container.containers.sif.reader import read_sif

    offset = read_sif(sif).rootfs_offset
    where = Path(tempfile.mkdtemp(prefix="hvd-startup-mnt-"))
    sh("squashfuse", "-o", f"offset={offset}", str(sif), str(where))
    try:
        yield where
    finally:
        subprocess.run(["fusermount", "-u", str(where)], check=False)
        subprocess.run(["umount", str(where)], check=False, stderr=subprocess.DEVNULL)
        with contextlib.suppress(OSError):
            where.rmdir()


def squashfs_file(sif: Path, target: Path) -> Path:
    """The SIF's root file system partition as a SquashFS file of its own (the bytes as they are)."""
    sys.path.insert(0, str(ROOT))
    from hvd_container.containers.sif.reader import read_sif

    info = read_sif(sif)
    with sif.open("rb") as src, target.open("wb") as dst:
        src.seek(info.rootfs_offset)
        left = info.rootfs_size
        while left:
            chunk = src.read(min(left, 1 << 22))
            if not chunk:
                sys.exit(f"{sif}: ends inside its root file system")
            dst.write(chunk)
            left -= len(chunk)
    return target


def touched_bytes(sqfs: Path, script: Path, env: dict[str, str]) -> int | None:
    """Bytes of the SquashFS file one start reads: the page cache dropped, one launch from the
    file, then what of it is in the cache (fincore). The local nodes share one page cache, so
    this is what each node of a real cluster reads from the shared file system to start; None
    where the cache cannot be dropped (not root)."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        print(f"page cache not dropped ({exc.strerror}): bytes read not measured", file=sys.stderr)
        return None
    one_launch(sqfs, 2, script, env)
    done = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", str(sqfs)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(done.stdout.split()[0])


def one_launch(
    image: Path,
    nodes: int,
    script: Path,
    env: dict[str, str],
    controller: str = "mpi",
    extra: tuple[str, ...] = (),
) -> tuple[float, float]:
    """(seconds to the last rank's start, seconds to the last rank's hvd.init() or
    init_process_group()) of one run."""
    argv = [sys.executable, "-m", "hvd_container", "run", "--site", "local", "--image",
            str(image), "-N", str(nodes), "--ntasks-per-node", "1", "--controller", controller,
            *extra, script.name]  # fmt: skip
    started = time.time()
    done = subprocess.run(
        argv, env=env, cwd=script.parent, capture_output=True, text=True, timeout=900
    )
    rows = LINE.findall(done.stdout)
    if done.returncode != 0 or len(rows) != nodes:
        sys.exit(f"launch failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    for copy in STAGED.findall(done.stdout + done.stderr):  # one job's copy: not left behind
        Path(copy).unlink(missing_ok=True)
    return (
        max(float(r[2]) for r in rows) - started,
        max(float(r[3]) for r in rows) - started,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=default_image())
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    sif = image_or_exit(opts.image, "bench/startup.py")
    sh("sh", str(ROOT / "testbed" / "charliecloud.sh"), "up")
    env = clean_env()
    # The script lies in /tmp, which exists in the image: ch-run binds the working directory,
    # and a read-only squashfuse mount cannot get a new bind destination.
    script = Path("/tmp") / f"hvd-startup-{os.getpid()}.py"
    script.write_text(FIRST)
    torch_script = Path("/tmp") / f"hvd-startup-torch-{os.getpid()}.py"
    torch_script.write_text(FIRST_TORCH)
    figures: dict[tuple[int, str], list[tuple[float, float]]] = {}
    # ch-run mounts a SquashFS file under /var/tmp/$USER.ch, made when missing: the local nodes
    # share /var/tmp, so two of them making it at once fail ("File exists"); a node has its own
    Path("/var/tmp", f"{env['USER']}.ch").mkdir(mode=0o700, exist_ok=True)
    # beside the scripts: the working directory is the shared file system every node sees
    sqfs = squashfs_file(sif, Path("/tmp") / f"hvd-startup-{os.getpid()}.sqfs")
    size = sqfs.stat().st_size
    try:
        sys.path.insert(0, str(ROOT))
        from hvd_container.launcher.runtimes.charliecloud import prepare_image

        prepare_image(str(sif))  # the unpacked copy, warm from here on
        sh("sh", str(ROOT / "testbed" / "slurm.sh"), "up", "--nodes", "2")
        touched = touched_bytes(sqfs, script, env)
        with mounted(sif) as mnt:
            for nodes in opts.nodes:
                sh("sh", str(ROOT / "testbed" / "slurm.sh"), "up", "--nodes", str(nodes))
                for _ in range(opts.repeat):
                    for mode, image, first, controller, extra in (
                        ("unpacked", sif, script, "mpi", ()),
                        ("mounted", mnt, script, "mpi", ()),
                        ("sqfs", sqfs, script, "mpi", ()),
                        ("staged", sqfs, script, "mpi", ("--stage",)),
                        ("torch", sif, torch_script, "torch", ()),  # unpacked, gloo
                    ):
                        got = one_launch(image, nodes, first, env, controller, extra)
                        figures.setdefault((nodes, mode), []).append(got)
    finally:
        script.unlink(missing_ok=True)
        torch_script.unlink(missing_ok=True)
        sqfs.unlink(missing_ok=True)
        sh("sh", str(ROOT / "testbed" / "slurm.sh"), "up")
    if touched is not None:
        print(
            f"a start reads {touched / 1e6:.0f} MB of the image's {size / 1e6:.0f} MB SquashFS "
            "file (page cache dropped, one launch from the file, fincore)"
        )
    print(
        f"median of {opts.repeat} runs; seconds from `hvd-container run` (sbatch) to the last rank's"
    )
    print(f"{'nodes':>5}  {'mode':<9} {'python started':>15} {'init done':>16}")
    print("(init: hvd.init(), but init_process_group() for torch)")
    for (nodes, mode), runs in sorted(
        figures.items(), key=lambda kv: (kv[0][0], kv[0][1] != "unpacked")
    ):
        start = statistics.median(r[0] for r in runs)
        ready = statistics.median(r[1] for r in runs)
        print(f"{nodes:>5}  {mode:<9} {start:>15.2f} {ready:>16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
