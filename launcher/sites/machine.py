"""What only this machine can tell a launch: which site it is, what srun's MPI plugins are,
which driver its GPUs run. Each is asked at most once, and only when a check needs it."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

# a query that hangs (an unreachable slurmctld, a wedged GPU) must not hang the launch
QUERY_TIMEOUT = 30


class ThisMachine:
    """This machine, as the launch checks see it. `site_here`: the site it is (doctor names
    it); None: the site the launch is for (a launch starts from its own login node)."""

    def __init__(self, site_here: str | None = None) -> None:
        self.site_here = site_here
        # a runtime's listing of the images it can run (its images_listing command) -> output
        self.listings: dict[tuple[str, ...], str | None] = {}

    def not_the_site(self, site: str) -> str | None:
        """Why this machine cannot speak for `site`'s Slurm and GPUs, or None."""
        if self.site_here is None or self.site_here == site:
            return None
        return (
            f"this machine is site {self.site_here}, not {site}: run doctor on {site}'s login "
            "node for what only the site can tell"
        )

    @functools.cached_property
    def srun_mpi_plugins(self) -> list[str] | None:
        """What `srun --mpi=list` offers here (None when srun is not installed)."""
        proc = _ask(["srun", "--mpi=list"])
        return None if proc is None else parse_mpi_list(proc.stdout + proc.stderr)

    @functools.cached_property
    def nvidia_driver(self) -> str | None:
        """The driver of this node's GPUs (nvidia-smi), or None where there is none."""
        proc = _ask(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        if proc is None:
            return None
        first = proc.stdout.strip().splitlines()[0].strip() if proc.stdout.strip() else ""
        ok = proc.returncode == 0 and re.fullmatch(r"[0-9]+(\.[0-9]+)*", first)
        return first if ok else None

    def listing(self, command: tuple[str, ...]) -> str | None:
        """What a runtime's image-listing command (`shifterimg images`) prints here, asked
        once; None where it is not installed or fails."""
        if command not in self.listings:
            proc = _ask(list(command))
            self.listings[command] = (
                proc.stdout if proc is not None and proc.returncode == 0 else None
            )
        return self.listings[command]


def _ask(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    """One of this machine's tools, asked within the time limit; None where it is not
    installed, cannot start or does not answer in time."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=QUERY_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None


def parse_mpi_list(text: str) -> list[str]:
    """Plugin names from `srun --mpi=list` (indented names, then "versions available: a,b")."""
    plugins: list[str] = []
    for line in text.splitlines():
        match = re.search(r"versions available:\s*(.+)$", line)
        if match:
            plugins += [p.strip() for p in match.group(1).split(",") if p.strip()]
        elif line.startswith(("\t", " ")) and line.strip():
            plugins.append(line.strip().removeprefix("srun: ").split()[0])
        elif line.startswith("srun: ") and "MPI" not in line and line[6:].strip():
            plugins.append(line[6:].split()[0])  # older Slurm: "srun: pmix"
    return list(dict.fromkeys(plugins))
