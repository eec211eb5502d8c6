"""How long `hvd-container run --dry-run` takes, end to end, in a new virtualenv.

The budget is a median of at most 150 ms for the dry run and for `hvd-container --help`.
The project is installed (`pip install .`, not editable: no import hooks of a development
install) into a new virtualenv that sees nothing else, and the dry run is timed there in new
processes (default 21), taking turns with the interpreter's own start-up (`python -c pass`),
`hvd-container --version` and `hvd-container --help` in the same virtualenv, so the figures
come from the same machine state. Usage:
    python bench/dryrun.py [--runs N] [--site SITE] [--max-ms 150] [--max-help-ms 150] [--venv DIR]
                           [--imports]

--venv reuses a virtualenv made by an earlier run (pip needs the package index: a fresh one
needs the network or a wheelhouse in pip's configuration).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# --imports: what the dry run's time is made of, each alone in a new process (the CLI's parser;
# the parser with the pydantic it builds each parameter's check with; pydantic alone; the site
# model, which imports both and builds its classes)
IMPORTS = ("typer", "typer._adapters", "pydantic.main", "hvd_container.launcher.sites.model")


def new_virtualenv(where: Path) -> Path:
    """A virtualenv at `where` with this checkout installed as a user installs it; its python."""
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
        check=True,
    )
    return python


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


def summary(times: list[float]) -> tuple[float, float]:
    """(median, p90)."""
    ordered = sorted(times)
    return statistics.median(ordered), ordered[round(0.9 * (len(ordered) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--site", default="perlmutter")
    parser.add_argument("--max-ms", type=float, default=150.0)
    parser.add_argument("--max-help-ms", type=float, default=150.0)
    parser.add_argument("--venv", type=Path, help="an existing virtualenv to time in")
    parser.add_argument(
        "--imports", action="store_true", help="also time the imports the dry run is made of"
    )
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        python = opts.venv / "bin" / "python" if opts.venv else new_virtualenv(Path(tmp) / "venv")
        cli = str(python.with_name("hvd-container"))
        script = Path(tmp, "train.py")
        script.write_text("import horovod.torch as hvd\nhvd.init()\n")
        argv = [
            cli, "run", "--site", opts.site, "--image", "user/img:tag",
            "-n", "8", "--comment", "pytorch", "--account", "m1234_g", "--dry-run", str(script), "--epochs", "3",
        ]  # fmt: skip
        # nothing of this machine's session: no allocation, no user site profile
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "LANG": "C.UTF-8"}
        commands = {
            "dry run": argv,
            "version": [cli, "--version"],
            "help": [cli, "--help"],
            "python": [str(python), "-c", "pass"],
        }
        if opts.imports:
            commands.update({f"import {m}": [str(python), "-c", f"import {m}"] for m in IMPORTS})
        results = measure(commands, env, opts.runs)
        for failed, (done, _) in results.items():
            if done.returncode != 0:
                print(f"{failed}: exit {done.returncode}\n{done.stderr}", file=sys.stderr)
                return 1
        done, times = results["dry run"]
        version, start_times = results["version"][1], results["python"][1]
        help_median = summary(results["help"][1])[0]
    median, p90 = summary(times)
    start = summary(start_times)[0]
    print(
        f"run --dry-run ({opts.site}, {opts.runs} runs, new virtualenv): median {median:.1f} ms, p90 {p90:.1f} ms"
    )
    print(f"  the interpreter alone (`python -c pass`), same runs: median {start:.1f} ms")
    print(f"  the CLI's share of the dry run: {median - start:.1f} ms")
    print(f"  `hvd-container --version`, same runs: median {summary(version)[0]:.1f} ms")
    print(f"  `hvd-container --help`, same runs: median {help_median:.1f} ms")
    for name, (_, took) in results.items():
        if name.startswith("import "):
            print(f"  `python -c '{name}'`, same runs: median {summary(took)[0]:.1f} ms")
    print(f"  {done.stdout.strip()}")
    over = [
        f"{what}: median {got:.1f} ms > {most:.0f} ms"
        for what, got, most in (
            ("run --dry-run", median, opts.max_ms),
            ("--help", help_median, opts.max_help_ms),
        )
        if got > most
    ]
    for line in over:
        print(f"over budget: {line}", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
