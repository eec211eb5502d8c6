"""Build benchmark: cold build time, rebuild after one pip extra changed, final image size.

Runs real builds through the Docker engine (started with testbed/docker.sh):
  1. cold: the CPU recipe with every layer rebuilt (--no-cache);
  2. warm-up: the recipe plus one pip extra (only late layers build);
  3. rebuild: that extra swapped for another one, timed, as a fraction of the cold build;
  4. the verified image's size.
`python bench/build.py [RECIPE] [--skip-cold]` (--skip-cold reuses the layer cache for step 1 and
reports that the cold figure is not measured).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXTRA_A = "six"
EXTRA_B = "tomli"


def child(directory: Path, parent: str, name: str, extra: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(f"extends: {parent}\nname: {name}\npip:\n  - {extra}\n")
    return path


def timed_build(ref: str, no_cache: bool = False) -> tuple[float, str]:
    from containers.build import BuildOptions, build_recipe
    from containers.recipe import load_recipe

    steps = {"built": 0, "cached": 0}

    def report(kind: str, phase: str, text: str) -> None:
        if kind == "step":
            steps["built"] += 1
        elif kind == "cached" and phase != "done":
            steps["cached"] += 1
            steps["built"] -= 1

    start = time.monotonic()
    result = build_recipe(load_recipe(ref), report, BuildOptions(no_cache=no_cache))
    seconds = time.monotonic() - start
    return seconds, f"{steps['built']} steps run, {steps['cached']} from cache -> {result.tag}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", nargs="?", default="cpu-bookworm")
    parser.add_argument("--skip-cold", action="store_true")
    args = parser.parse_args()
    for script in ("docker.sh", "base-image.sh"):
        subprocess.run(["sh", str(ROOT / "testbed" / script)], check=True)

    from containers.engine.docker_api import docker_client
    from containers.recipe import load_recipe

    recipe = load_recipe(args.recipe)
    cold, how = timed_build(args.recipe, no_cache=not args.skip_cold)
    label = "cold build (no layer cache)" if not args.skip_cold else "build (layer cache used)"
    print(f"{label:<40} {cold:8.1f} s   ({how})", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        name = f"{recipe.name}-bench"
        warm, how = timed_build(str(child(Path(tmp), args.recipe, name, EXTRA_A)))
        print(f"{'add pip extra ' + EXTRA_A:<40} {warm:8.1f} s   ({how})", flush=True)
        rebuild, how = timed_build(str(child(Path(tmp), args.recipe, name, EXTRA_B)))
        share = 100 * rebuild / cold
        print(f"{'rebuild, extra ' + EXTRA_A + ' -> ' + EXTRA_B:<40} {rebuild:8.1f} s   ({how})")
        print(f"{'rebuild / cold':<40} {share:8.1f} %   (target < 10 %)")

    api = docker_client()
    size = api.inspect_image(recipe.image_tag)["Size"]
    print(f"{'image size ' + recipe.image_tag:<40} {size / 1e6:8.0f} MB")
    hit_start = time.monotonic()
    _, how = timed_build(args.recipe)
    print(f"{'unchanged recipe again (cache hit)':<40} {time.monotonic() - hit_start:8.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
