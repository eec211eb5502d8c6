"""How long `hvd-container lock` takes for the shipped recipes it can resolve here.

For each recipe (default: the two CPU recipes and neuron-ngc-pt2203, whose indexes this
machine reaches), copies it to a temporary folder and locks it there (the shipped files stay
untouched), N times with uv's cache off (cold: every index page and metadata fetched anew) and
N times with it (warm), and prints the medians, the packages resolved, and whether any wheel
was downloaded (a lock needs metadata only). Usage:
    python bench/lock.py [--runs N] [RECIPE ...]
The target: a shipped recipe locks in seconds (median cold < 30 s).
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

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["cpu-bookworm", "cpu-bookworm-tf-pt", "neuron-ngc-pt2203"]


def lock_once(recipe: Path, cache: Path | None) -> tuple[float, int]:
    env = {**os.environ, **({"UV_CACHE_DIR": str(cache)} if cache else {"UV_NO_CACHE": "1"})}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "hvd_container", "lock", str(recipe), "--json"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"lock {recipe.name} failed: {done.stderr.strip()}")
    import json

    packages = json.loads(done.stdout.splitlines()[-1])["packages"]
    return seconds, len(packages)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-cold-s", type=float, default=30.0)
    parser.add_argument("recipes", nargs="*", default=DEFAULT)
    args = parser.parse_args()
    worst = 0.0
    print(
        f"{'recipe':<22} {'packages':>8} {'cold median':>12} {'warm median':>12}  wheels in cache"
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in args.recipes:
            recipe = work / f"{name}.yaml"
            shutil.copy(ROOT / "recipes" / f"{name}.yaml", recipe)
            cache = work / f"cache-{name}"
            cold = [lock_once(recipe, None)[0] for _ in range(args.runs)]
            warm_runs = [lock_once(recipe, cache) for _ in range(args.runs)]
            count = warm_runs[0][1]
            wheels = sum(1 for _ in cache.rglob("*.whl")) if cache.exists() else 0
            worst = max(worst, statistics.median(cold))
            print(
                f"{name:<22} {count:>8} {statistics.median(cold):>10.1f} s "
                f"{statistics.median(w for w, _ in warm_runs):>10.1f} s  {wheels}"
            )
    if worst > args.max_cold_s:
        print(f"slowest cold median {worst:.1f} s is over the {args.max_cold_s:.0f} s target")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
