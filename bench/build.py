"""Build benchmark: cold build time, rebuild after one pip extra changed, final image size;
with --stage, Horovod's wheel stage against today's one-stage shape.

Runs real builds through the Docker engine (started with testbed/docker.sh):
  1. cold: the CPU recipe with every layer rebuilt (--no-cache);
  2. warm-up: the recipe plus one pip extra (only late layers build);
  3. rebuild: that extra swapped for another one, timed, as a fraction of the cold build;
  4. the verified image's size.
`python bench/build.py [RECIPE] --stage` builds, on a warm cache, a recipe that extends RECIPE
and adds one pip package (locked from RECIPE's pins), in both shapes one after the other: the
parent in that shape first (untimed, a cache hit when built before), then the derived recipe,
timed; it prints each time and their ratio (goal: the wheel-stage derived build under a minute
here, no compile).
`python bench/build.py [RECIPE] [--skip-cold]` (--skip-cold reuses the layer cache for step 1 and
reports that the cold figure and the ratio are not measured). The benchmark's own images (the
`<recipe>-bench` tag and its earlier build, an image the cold build untagged) are removed at the
end; it exits 1 when the rebuild takes 10 % of the cold build or more.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXTRA_A = "six"
EXTRA_B = "tomli"


def child(directory: Path, parent: str, name: str, extra: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(f"extends: {parent}\nname: {name}\npip:\n  - {extra}\n")
    return path


def timed_build(ref: str, no_cache: bool = False) -> tuple[float, str, str]:
    """(seconds, how it went, image id) of building recipe ref."""
    from hvd_container.containers.build import BuildOptions, build_recipe
    from hvd_container.containers.recipe_loader import load_recipe

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
    how = f"{steps['built']} steps run, {steps['cached']} from cache -> {result.tag}"
    return seconds, how, result.image_id


def stage_compare(api: Any, parent: str) -> int:
    """The derived recipe built in today's one-stage shape and with Horovod's wheel stage."""
    from unittest import mock

    from hvd_container.containers.blocks import horovod_wheel
    from hvd_container.containers.lock import lock_recipe
    from hvd_container.containers.recipe_loader import load_recipe, recipe_lock_file

    recipe = load_recipe(parent)
    name = f"{recipe.name}-stage-bench"
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.yaml"
        parent_file = recipe_lock_file(parent)[1].with_suffix(".yaml")
        extras = "".join(f"  - {p}\n" for p in [*recipe.pip, EXTRA_A])
        path.write_text(f"extends: {parent_file}\nname: {name}\npip:\n{extras}")
        lock_recipe(str(path))
        for shape, one_stage in (("one stage (before)", True), ("wheel stage", False)):
            patched = mock.patch.object(horovod_wheel, "applies", lambda _r: False)
            with patched if one_stage else contextlib.nullcontext():
                timed_build(parent)
                times[shape], how, _image = timed_build(str(path))
            print(f"{'derived, ' + shape:<40} {times[shape]:8.1f} s   ({how})", flush=True)
    ratio = times["wheel stage"] / times["one stage (before)"]
    print(f"{'wheel stage / one stage':<40} {ratio:8.2f}")
    remove_images(api, [f"{name}:{recipe.version}"])
    return 0 if times["wheel stage"] < 60 else 1


def remove_images(api: Any, refs: list[str]) -> None:
    """Remove what the benchmark made: its tag and images no tag refers to any more.

    Untagged parents (the child builds' own layers) go too; layers other images use stay.
    """
    import docker.errors

    for ref in dict.fromkeys(refs):
        try:
            info = api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            continue
        if ref.startswith("sha256:") and info.get("RepoTags"):
            continue  # an image id that is still (or again) tagged is someone's image
        with contextlib.suppress(docker.errors.APIError):
            api.remove_image(ref)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", nargs="?", default="cpu-bookworm")
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--stage", action="store_true")
    args = parser.parse_args()
    for script in ("docker.sh", "base-image.sh"):
        subprocess.run(["sh", str(ROOT / "testbed" / script)], check=True)

    from hvd_container.containers.engine.docker_api import docker_client
    from hvd_container.containers.recipe_loader import load_recipe

    api = docker_client()
    if args.stage:
        return stage_compare(api, args.recipe)
    recipe = load_recipe(args.recipe)
    made: list[str] = []
    before = _image_id(api, recipe.image_tag)
    cold, how, image_id = timed_build(args.recipe, no_cache=not args.skip_cold)
    if before and before != image_id:
        made.append(before)  # the cold build took the tag from it: untagged now, ours to drop
    if args.skip_cold:
        print(f"{'build (layer cache used, not cold)':<40} {cold:8.1f} s   ({how})", flush=True)
    else:
        print(f"{'cold build (no layer cache)':<40} {cold:8.1f} s   ({how})", flush=True)

    ok = True
    name = f"{recipe.name}-bench"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            warm, how, first = timed_build(str(child(Path(tmp), args.recipe, name, EXTRA_A)))
            made += [first, f"{name}:{recipe.version}"]
            print(f"{'add pip extra ' + EXTRA_A:<40} {warm:8.1f} s   ({how})", flush=True)
            rebuild, how, second = timed_build(str(child(Path(tmp), args.recipe, name, EXTRA_B)))
            made.append(second)
            print(
                f"{'rebuild, extra ' + EXTRA_A + ' -> ' + EXTRA_B:<40} {rebuild:8.1f} s   ({how})"
            )
        if args.skip_cold:
            print(f"{'rebuild / cold':<40} {'n/a':>8}     (cold build not measured: --skip-cold)")
        else:
            share = 100 * rebuild / cold
            ok = share < 10
            print(f"{'rebuild / cold':<40} {share:8.1f} %   (target < 10 %)")

        size = api.inspect_image(recipe.image_tag)["Size"]
        print(f"{'image size ' + recipe.image_tag:<40} {size / 1e6:8.0f} MB")
        hit_start = time.monotonic()
        timed_build(args.recipe)
        print(f"{'unchanged recipe again (cache hit)':<40} {time.monotonic() - hit_start:8.1f} s")
    finally:
        # Tag first, so that the images it held become untagged and removable.
        remove_images(api, [f"{name}:{recipe.version}", *made])
    return 0 if ok else 1


def _image_id(api: Any, ref: str) -> str | None:
    import docker.errors

    try:
        return str(api.inspect_image(ref)["Id"])
    except docker.errors.ImageNotFound:
        return None


if __name__ == "__main__":
    sys.exit(main())
