"""How long `hvd-container run --dry-run` takes, end to end, in a new virtualenv.

The budget is a median of at most 150 ms for the dry run and for `hvd-container --help`.
The project is installed (`pip install .`, not editable: no import hooks of a development
install) into a new virtualenv that sees nothing else, and the dry run is timed there in new
processes (default 21), taking turns with the interpreter's own start-up (`python -c pass`),
`hvd-container --version` and `hvd-container --help` in the same virtualenv, so the figures
come from the same machine state, and with the libraries it is built on loaded alone (LIBRARIES:
what the dry run costs before any code of this package runs). Usage:
    python bench/dryrun.py [--runs N] [--site SITE] [--max-ms 150] [--max-help-ms 150] [--venv DIR]
                           [--imports] [--python PYTHON] [--instructions]

--venv reuses a virtualenv made by an earlier run (pip needs the package index: a fresh one
needs the network or a wheelhouse in pip's configuration). --python times the same dry run
under another interpreter as well, in a virtualenv of its own (or the one it belongs to), taking
turns with the first: how the interpreter was built moves the figure (bench/README.md).
--instructions also counts the instructions one dry run executes under each (valgrind's
callgrind): unlike the time, the count does not follow the machine's load, so two checkouts
can be told apart by less than the time's spread.
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

ROOT = Path(__file__).resolve().parents[1]
# --imports: what the dry run's time is made of, each alone in a new process (the CLI's parser;
# the parser with the pydantic it builds each parameter's check with; pydantic alone; the site
# model, which imports both and builds its classes)
IMPORTS = ("typer", "typer._adapters", "pydantic.main", "hvd_container.launcher.sites.model")
# What every dry run pays before any code of this package runs, in one process: typer's parser
# with the pydantic it checks each parameter with, pydantic's first validator (its plugin
# look-up imports importlib.metadata) and PyYAML, which reads the site profile. The dry run less
# this is the package's own share.
LIBRARIES = "import typer._adapters, yaml; from pydantic import TypeAdapter; TypeAdapter(int)"


# callgrind's summary line on stderr: "==PID== Collected : N"
COLLECTED = re.compile(r"^==\d+== Collected : (\d+)$", re.MULTILINE)


def new_virtualenv(where: Path, interpreter: str = sys.executable) -> Path:
    """A virtualenv at `where`, made by `interpreter`, with this checkout installed as a user
    installs it; its python."""
    subprocess.run([interpreter, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
        check=True,
    )
    return python


def virtualenv_of(interpreter: str, where: Path) -> Path:
    """The python to time the other interpreter's dry run with: `interpreter` itself where it is
    a virtualenv's with hvd-container installed beside it, else a new virtualenv's made by it."""
    given = Path(interpreter)
    if given.with_name("hvd-container").is_file():
        return given
    return new_virtualenv(where, interpreter)


def counted(collected: str) -> int:
    """The instructions callgrind's summary (its stderr) reports."""
    found = COLLECTED.search(collected)
    if found is None:
        raise ValueError("no 'Collected : N' line in valgrind's output")
    return int(found.group(1))


def instructions(argv: list[str], env: dict[str, str]) -> int:
    """Instructions one run of `argv` executes, by valgrind's callgrind (the hash seed fixed:
    a random one moves the count by a few hundredths of a per cent)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        env={**env, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise ValueError(f"valgrind {argv[0]}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return counted(done.stderr)


def python_version(python: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


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
    parser.add_argument(
        "--python",
        help="another interpreter (or a virtualenv's python with hvd-container installed) to "
        "time the same dry run under, taking turns",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the instructions of one dry run under each interpreter (valgrind)",
    )
    opts = parser.parse_args()
    if opts.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions: valgrind is not on PATH (Debian: apt-get install valgrind)")
    if opts.python and shutil.which(opts.python) is None:
        parser.error(f"--python: {opts.python!r} is not an interpreter found here")
    with tempfile.TemporaryDirectory() as tmp:
        python = opts.venv / "bin" / "python" if opts.venv else new_virtualenv(Path(tmp) / "venv")
        other = virtualenv_of(opts.python, Path(tmp) / "other") if opts.python else None
        script = Path(tmp, "train.py")
        script.write_text("import horovod.torch as hvd\nhvd.init()\n")

        def dry_run(python: Path) -> list[str]:
            return [
                str(python.with_name("hvd-container")), "run", "--site", opts.site, "--image", "user/img:tag",
                "-n", "8", "--comment", "pytorch", "--account", "m1234_g", "--dry-run", str(script), "--epochs", "3",
            ]  # fmt: skip

        cli = str(python.with_name("hvd-container"))
        # nothing of this machine's session: no allocation, no user site profile
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "LANG": "C.UTF-8"}
        commands = {
            "dry run": dry_run(python),
            "version": [cli, "--version"],
            "help": [cli, "--help"],
            "python": [str(python), "-c", "pass"],
            "libraries": [str(python), "-c", LIBRARIES],
        }
        if other is not None:
            commands["other dry run"] = dry_run(other)
            commands["other python"] = [str(other), "-c", "pass"]
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
        # the interpreters by how the figures name them
        pythons = {"the first": python} | ({f"under {opts.python}": other} if other else {})
        # named only beside another interpreter's figures or the counts
        named = other is not None or opts.instructions
        versions = {which: python_version(p) for which, p in pythons.items()} if named else {}
        try:
            counts = {
                which: (instructions(dry_run(p), env), instructions([str(p), "-c", "pass"], env))
                for which, p in (pythons.items() if opts.instructions else ())
            }
        except ValueError as exc:
            print(f"--instructions: {exc}", file=sys.stderr)
            return 1
    median, p90 = summary(times)
    start = summary(start_times)[0]
    print(
        f"run --dry-run ({opts.site}, {opts.runs} runs, new virtualenv): median {median:.1f} ms, p90 {p90:.1f} ms"
    )
    print(f"  the interpreter alone (`python -c pass`), same runs: median {start:.1f} ms")
    print(f"  the CLI's share of the dry run: {median - start:.1f} ms")
    libraries = summary(results["libraries"][1])[0]
    print(
        f"  the libraries alone (typer's parameter checks, pydantic's first validator, PyYAML), "
        f"same runs: median {libraries:.1f} ms ({libraries / median:.2f} of the dry run); "
        f"this package's own share: {median - libraries:.1f} ms"
    )
    print(f"  `hvd-container --version`, same runs: median {summary(version)[0]:.1f} ms")
    print(f"  `hvd-container --help`, same runs: median {help_median:.1f} ms")
    for name, (_, took) in results.items():
        if name.startswith("import "):
            print(f"  `python -c '{name}'`, same runs: median {summary(took)[0]:.1f} ms")
    if other is not None:
        other_median, other_p90 = summary(results["other dry run"][1])
        print(
            f"  under {opts.python} (Python {versions[f'under {opts.python}']}; the first: "
            f"{versions['the first']}), same runs: median {other_median:.1f} ms, p90 "
            f"{other_p90:.1f} ms ({other_median / median:.2f} of the first); its `python -c pass` "
            f"{summary(results['other python'][1])[0]:.1f} ms"
        )
    for which, (dry, bare) in counts.items():
        print(
            f"  instructions, one run each, {which} (Python {versions[which]}): the dry run "
            f"{dry / 1e6:,.1f} M, `python -c pass` {bare / 1e6:,.1f} M"
        )
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
