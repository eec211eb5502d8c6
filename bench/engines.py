"""Engine benchmark: the same recipe built cold through the Docker engine (as root) and
through rootless podman (as an unprivileged user, `--engine podman`), side by side.

Needs the Docker engine (testbed/docker.sh up), the Debian base in both (testbed/base-image.sh,
then `testbed/podman-rootless.sh up` and `load-base bookworm`) and hvd-container installed in
the user's virtualenv (the end-to-end suite's tests/e2e/test_podman_rootless.py makes it under
/var/tmp/hvd-e2e/rootless/venv). Each round builds with `--no-cache` (every step runs; the
pip downloads come from the same local wheelhouse and mirror) and verifies, the engines taking
turns. `python bench/engines.py [RECIPE] [--repeat N]` prints each build's seconds, the
medians and their ratio (podman / Docker).

It builds RECIPE under a name of its own (a recipe file extending it, in a folder it removes)
and removes that image after each build. Built under RECIPE's own tag, a cold build would
replace the image the tests use with a second chain of the same first layers, newer than the
first, and the classic builder follows the newest chain: every build that shares those first
layers but not the rest (a recipe extending cpu-bookworm: Horovod) would then miss the cache.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USER = os.environ.get("HVD_ROOTLESS_USER", "hvdbuild")
VENV = Path(os.environ.get("HVD_E2E_CACHE", "/var/tmp/hvd-e2e")) / "rootless" / "venv"
PASSED = ("PIP_", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
BENCH_NAME = "hvd-bench-engines"  # the image each build makes, removed after it


def docker_build(recipe: str) -> list[str]:
    return [sys.executable, "-m", "hvd_container", "build", recipe, "--engine", "docker",
            "--no-cache", "--progress", "plain"]  # fmt: skip


def podman_build(recipe: str) -> list[str]:
    settings = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(PASSED)]
    argv = ["env", *settings, str(VENV / "bin" / "hvd-container"), "build", recipe,
            "--engine", "podman", "--no-cache", "--progress", "plain"]  # fmt: skip
    return ["su", "-", USER, "-c", f"cd /tmp && exec {shlex.join(argv)}"]


def docker_remove(tag: str) -> list[str]:
    return ["docker", "rmi", tag]  # its untagged parents, the build's own layers, go with it


def podman_remove(tag: str) -> list[str]:
    return ["su", "-", USER, "-c", shlex.join(["podman", "rmi", tag])]


def bench_recipe(recipe: str, folder: Path) -> Path:
    """A recipe file extending recipe under BENCH_NAME, its lock beside it, readable by USER."""
    path = folder / f"{BENCH_NAME}.yaml"
    path.write_text(f"extends: {recipe}\nname: {BENCH_NAME}\n")
    shutil.copy(ROOT / "recipes" / f"{recipe}.lock", path.with_suffix(".lock"))
    for made in (folder, path, path.with_suffix(".lock")):
        made.chmod(0o755 if made.is_dir() else 0o644)
    return path


def timed(argv: list[str]) -> float:
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"build failed: {shlex.join(argv[:6])} ...\n{proc.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", nargs="?", default="cpu-bookworm-torch")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if not (VENV / "bin" / "hvd-container").exists():
        sys.exit(f"{VENV}: no hvd-container for {USER} (run tests/e2e/test_podman_rootless.py)")
    runs: dict[str, list[float]] = {"docker": [], "podman (rootless)": []}
    engines = (("docker", docker_build, docker_remove),
               ("podman (rootless)", podman_build, podman_remove))  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="hvd-bench-engines-"))
    try:
        recipe = str(bench_recipe(args.recipe, folder))
        for round_ in range(args.repeat):
            for name, build, remove in engines:
                try:
                    seconds = timed(build(recipe))
                finally:
                    subprocess.run(remove(f"{BENCH_NAME}:1"), capture_output=True)
                runs[name].append(seconds)
                print(f"round {round_ + 1}: {name:18} {seconds:7.1f} s", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    docker, podman = (statistics.median(v) for v in runs.values())
    print(f"\n{args.recipe}, cold (--no-cache) and verified, median of {args.repeat}:")
    print("| engine | seconds |\n| --- | --- |")
    print(
        f"| Docker {_version(['docker', 'version', '-f', '{{.Server.Version}}'])} | {docker:.1f} |"
    )
    print(f"| podman {_version(['podman', '--version'])}, rootless | {podman:.1f} |")
    print(f"| ratio podman / Docker | {podman / docker:.2f} |")
    return 0


def _version(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True)
    return proc.stdout.strip().split()[-1] if proc.returncode == 0 and proc.stdout.strip() else "?"


if __name__ == "__main__":
    raise SystemExit(main())
