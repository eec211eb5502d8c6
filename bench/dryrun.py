"""How long `hvd-container run --dry-run` takes, end to end (new process each time).

Runs the installed command N times (default 21) for a built-in site and prints the median and
p90 in milliseconds. The budget is a median under 150 ms. Usage:
    python bench/dryrun.py [--runs N] [--site SITE] [--max-ms 150]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def command() -> list[str]:
    """The console script next to this interpreter (no pyenv shim), else `python -m`."""
    script = Path(sys.executable).with_name("hvd-container")
    if script.exists():
        return [str(script)]
    found = shutil.which("hvd-container")
    return [found] if found else [sys.executable, "-m", "hvd_container"]


def measure(
    argv: list[str], env: dict[str, str], runs: int
) -> tuple[subprocess.CompletedProcess[str], list[float]]:
    """The last result and the wall-clock times (ms) of `runs` fresh processes."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        times.append((time.perf_counter() - start) * 1000)
        if done.returncode != 0:
            break
    return done, times


def summary(times: list[float]) -> tuple[float, float]:
    """(median, p90)."""
    ordered = sorted(times)
    return statistics.median(ordered), ordered[round(0.9 * (len(ordered) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--site", default="perlmutter")
    parser.add_argument("--max-ms", type=float, default=150.0)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp, "train.py")
        script.write_text("import horovod.torch as hvd\nhvd.init()\n")
        argv = [
            *command(), "run", "--site", opts.site, "--image", "user/img:tag",
            "-n", "8", "--comment", "pytorch", "--account", "m1234_g", "--dry-run", str(script), "--epochs", "3",
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
        done, times = measure(argv, env, opts.runs)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        _, floor = measure([*command(), "--version"], env, opts.runs)
    median, p90 = summary(times)
    print(
        f"run --dry-run ({opts.site}, {opts.runs} runs): median {median:.1f} ms, p90 {p90:.1f} ms"
    )
    print(f"  for comparison, `hvd-container --version`: median {summary(floor)[0]:.1f} ms")
    print(f"  {done.stdout.strip()}")
    if median > opts.max_ms:
        print(f"over budget: median {median:.1f} ms > {opts.max_ms:.0f} ms", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
