"""Launch overhead of `hvd-container run` on the local 2-node Slurm cluster.

Prints, for the same 2-rank Horovod job (examples/pytorch_synthetic.py, one rank per node), and
for the same 2-rank torch.distributed DDP job (examples/ddp_synthetic.py, `--controller torch`):
  - the training step time in the container (`hvd-container run`, ch-run from the SIF)
    against the same script on the host, like with like: the host virtualenv is the image's
    /opt/venv copied onto the host (the same torch build and the BLAS inside it, the host's
    python being the same Debian build), the host run is composed by the same launcher with
    `--runtime none` (the same srun options), gets the image's environment, and both sides get
    the same thread settings. The sides take turns; each run's figure is rank 0's median over
    its steps (at least 20), the result the median over the runs; target: container/host
    <= 1.05;
  - the time from starting `hvd-container run` to the first rank's first output line, inside
    an allocation (srun directly) and outside one (sbatch, then following the job).

Needs the CPU image as a SIF (`make sif`). Usage:
    python bench/launch.py [--image out/demo/cpu-bookworm_1.sif] [--repeat 3] [--max-ratio 1.05]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _cluster import (  # bench/: the script's folder, on sys.path
    ROOT,
    clean_env,
    default_image,
    hvd,
    image_or_exit,
    sh,
)

EXAMPLE = ROOT / "examples" / "pytorch_synthetic.py"
DDP_EXAMPLE = ROOT / "examples" / "ddp_synthetic.py"
CHECKPOINT = "checkpoint.pt"  # the example's default, in the run's directory
TRAIN_ARGS = ["--epochs", "3", "--samples", "8192", "--features", "256", "--hidden", "512"]
STEP = re.compile(r"^\[rank 0\] done: (\d+) steps, median step time ([0-9.]+) ms", re.M)
MIN_STEPS = 20
# the same on both sides (the example sets torch's intra-op threads from the CPU count)
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def host_venv(image: Path) -> Path:
    """The image's /opt/venv copied to the host (cached next to the unpacked image)."""
    sys.path.insert(0, str(ROOT))
    from hvd_container.launcher.runtimes.charliecloud import cache_dir, prepare_image

    prepared = prepare_image(str(image))
    assert prepared is not None  # a SIF
    venv = cache_dir() / f"{prepared.root.name}.host-venv"
    if not venv.is_dir():
        partial = venv.with_name(venv.name + ".part")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(prepared.root / "opt" / "venv", partial, symlinks=True)
        os.replace(partial, venv)
    # Horovod's MPI ops link against Debian's Open MPI, as in the image
    apt_install("libopenmpi3")
    return venv


def apt_install(*packages: str) -> None:
    """Install Debian packages through the testbed's helper (apt-get update first on a fresh
    machine, waits on the dpkg lock, installs only what is missing)."""
    lib = ROOT / "testbed" / "_lib.sh"
    sh("sh", "-c", '. "$1"; shift; tb_apt_install "$@"', "apt_install", str(lib), *packages)


def step_ms(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Rank 0's median step time of one run (ms)."""
    (cwd / CHECKPOINT).unlink(missing_ok=True)  # the example would resume from it, not train
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    match = STEP.search(done.stdout)
    if done.returncode != 0 or not match:
        sys.exit(f"launch failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    if int(match.group(1)) < MIN_STEPS:
        sys.exit(f"only {match.group(1)} steps in a run: at least {MIN_STEPS} are needed")
    return float(match.group(2))


def image_env(image: Path) -> dict[str, str]:
    """The environment ch-run gives the container (the image's env file), for the host run."""
    from hvd_container.launcher.runtimes.charliecloud import prepare_image

    prepared = prepare_image(str(image))
    assert prepared is not None  # a SIF
    env_file = prepared.env_file
    pairs = (line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    return {k: v for k, v in pairs if k not in ("PATH", "VIRTUAL_ENV", "HOME", "USER")}


def first_line_seconds(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    (cwd / CHECKPOINT).unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    elapsed = None
    for line in proc.stdout:
        if elapsed is None and line.startswith("[rank"):
            elapsed = time.perf_counter() - start
    proc.wait()
    if elapsed is None or proc.returncode != 0:
        sys.exit(f"launch failed ({proc.returncode}): {shlex_join(argv)}")
    return elapsed


def report(
    label: str, how: str, container: list[float], host: list[float], max_ratio: float
) -> float:
    """Print one job's step times, container against host (medians of the run medians, and
    the runs), and their ratio against the target; return the ratio."""
    c, h = statistics.median(container), statistics.median(host)
    ratio = c / h
    print(
        f"{label}step time, container ({how}): {c:.3f} ms (median of {len(container)} run medians)"
    )
    print(f"{label}step time, host virtualenv (--runtime none): {h:.3f} ms")
    print(f"  runs, container: {', '.join(f'{x:.2f}' for x in container)} ms")
    print(f"  runs, host:      {', '.join(f'{x:.2f}' for x in host)} ms")
    verdict = "ok" if ratio <= max_ratio else "OVER TARGET"
    print(f"{label}container/host: {ratio:.3f} (target <= {max_ratio}) {verdict}")
    return ratio


def shlex_join(argv: list[str]) -> str:
    import shlex

    return shlex.join(argv)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=default_image())
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--max-ratio", type=float, default=1.05)
    opts = parser.parse_args()
    image = image_or_exit(opts.image, "bench/launch.py")
    sh("sh", str(ROOT / "testbed" / "slurm.sh"), "up")
    sh("sh", str(ROOT / "testbed" / "charliecloud.sh"), "up")
    venv = host_venv(image)
    env = {**clean_env(), **THREADS}
    host_env = {
        **env,
        **image_env(image),
        "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv),
    }
    alloc = ["salloc", "-N", "2", "--ntasks-per-node=1", "--quiet"]
    launch = [*hvd(), "run", "--site", "local", "-N", "2", "--ntasks-per-node", "1"]
    run = [*launch, "--image", str(image)]
    bare = [*launch, "--runtime", "none"]  # the same srun line, python from the host venv
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        cwd = Path(tmp)
        container, host, ddp_container, ddp_host = [], [], [], []
        ddp = ["--controller", "torch"]
        for i in range(opts.repeat):
            sides = [
                (container, run, env, [str(EXAMPLE)]),
                (host, bare, host_env, [str(EXAMPLE)]),
                (ddp_container, [*run, *ddp], env, [str(DDP_EXAMPLE)]),
                (ddp_host, [*bare, *ddp], host_env, [str(DDP_EXAMPLE)]),
            ]
            for figures, argv, side_env, script in sides if i % 2 == 0 else sides[::-1]:
                figures.append(step_ms([*alloc, *argv, *script, *TRAIN_ARGS], side_env, cwd))
        short = [str(EXAMPLE), "--epochs", "1", "--samples", "256"]
        inside = [first_line_seconds([*alloc, *run, *short], env, cwd) for _ in range(opts.repeat)]
        outside = [first_line_seconds([*run, *short], env, cwd) for _ in range(opts.repeat)]
    ratio = report("", "hvd-container run, ch-run", container, host, opts.max_ratio)
    ddp_ratio = report(
        "DDP ", "--controller torch, ch-run", ddp_container, ddp_host, opts.max_ratio
    )
    print(
        f"run -> first rank's first line, inside an allocation: {statistics.median(inside):.2f} s"
    )
    print(
        f"run -> first rank's first line, submitted with sbatch: {statistics.median(outside):.2f} s"
    )
    return 0 if max(ratio, ddp_ratio) <= opts.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
