"""How long `hvd-container run --dry-run` takes, end to end (new process each time).

Runs the installed command N times (default 21) for a built-in site and prints the median and
p90 in milliseconds. The budget is a median under 150 ms. Usage:
    python bench/dryrun.py [--runs N] [--site SITE] [--max-ms 150]

The package's bytecode is compiled first, as `pip install` does for an installed copy (an
editable install under PYTHONDONTWRITEBYTECODE would otherwise compile every module on every
run). Beside the figure it prints the interpreter's own start-up on this machine (`python -c
pass`, which includes whatever the site-packages' .pth files do) and the CLI's share above it.
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
    commands: dict[str, list[str]], env: dict[str, str], runs: int
) -> dict[str, tuple[subprocess.CompletedProcess[str], list[float]]]:
    """Per command: its last result and the wall-clock times (ms) of `runs` fresh processes.

    The commands take turns, after one unmeasured round, so that each sees the same machine.
    """
    last: dict[str, subprocess.CompletedProcess[str]] = {}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(runs + 1):
        for name, argv in commands.items():
            start = time.perf_counter()
            last[name] = subprocess.run(argv, env=env, capture_output=True, text=True)
            if last[name].returncode != 0:
                return {name: (last[name], [])}
            if round_:
                times[name].append((time.perf_counter() - start) * 1000)
    return {name: (last[name], times[name]) for name in commands}


def compile_bytecode() -> None:
    """The __pycache__ an installed copy has, for the modules the command imports."""
    import compileall
    import importlib.util

    for package in ("hvd_container", "hvd_container.launcher", "hvd_container.containers"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                compileall.compile_dir(location, quiet=1)


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
    compile_bytecode()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp, "train.py")
        script.write_text("import horovod.torch as hvd\nhvd.init()\n")
        argv = [
            *command(), "run", "--site", opts.site, "--image", "user/img:tag",
            "-n", "8", "--comment", "pytorch", "--account", "m1234_g", "--dry-run", str(script), "--epochs", "3",
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
        results = measure(
            {
                "dry run": argv,
                "full CLI": [
                    sys.executable,
                    "-m",
                    "hvd_container.cli.app",
                    *argv[len(command()) :],
                ],
                "version": [*command(), "--version"],
                "python": [sys.executable, "-c", "pass"],
            },
            env,
            opts.runs,
        )
        for failed, (done, _) in results.items():
            if done.returncode != 0:
                print(f"{failed}: exit {done.returncode}\n{done.stderr}", file=sys.stderr)
                return 1
        done, times = results["dry run"]
        full, full_times = results["full CLI"]
        if (full.stdout, full.stderr) != (done.stdout, done.stderr):
            print(f"the full CLI printed otherwise:\n{full.stdout}{full.stderr}", file=sys.stderr)
            return 1
        version, python = results["version"][1], results["python"][1]
    median, p90 = summary(times)
    start = summary(python)[0]
    print(
        f"run --dry-run ({opts.site}, {opts.runs} runs): median {median:.1f} ms, p90 {p90:.1f} ms"
    )
    print(
        f"  the same through the full typer CLI: median {summary(full_times)[0]:.1f} ms "
        f"(console script / full CLI: {median / summary(full_times)[0]:.2f})"
    )
    print(f"  for comparison, `hvd-container --version`: median {summary(version)[0]:.1f} ms")
    print(
        f"  the interpreter alone (`python -c pass`): median {start:.1f} ms; "
        f"the CLI's share of the dry run: {median - start:.1f} ms"
    )
    print(f"  {done.stdout.strip()}")
    if median > opts.max_ms:
        print(f"over budget: median {median:.1f} ms > {opts.max_ms:.0f} ms", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
