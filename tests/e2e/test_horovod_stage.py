"""Horovod compiled once: a recipe that extends cpu-bookworm and adds a pip package, locked and
built for real, takes the compiled Horovod from the engine's cache (its wheel stage's steps say
`(cached)`), installs the wheel and verifies; the image has no compiler. Shared through the
local registry (`--wheel-cache`), the wheel is pushed by the build that made it and pulled by a
build that has neither it nor its image: that build has no compile step at all."""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from build_fixtures import CPU_RECIPE, ROOT, hvd

from hvd_container.cli.progress import format_plain

pytestmark = pytest.mark.e2e

NAME = "hvd-test-with-rich"
WHEELS = "/opt/hvd/wheels/horovod-*.whl"


def output_of(api: Any, image: str, command: str) -> str:
    """What `sh -c command` prints in a throw-away container of image."""
    cid = api.create_container(image, command=["sh", "-c", command])["Id"]
    try:
        api.start(cid)
        assert api.wait(cid, timeout=120)["StatusCode"] == 0
        return api.logs(cid).decode().strip()
    finally:
        api.remove_container(cid, force=True)


STEP = re.compile(r"^\[[\w-]+\] => \[\d+/\d+\] ")
CACHED = re.compile(r"^\[[\w-]+\]    \(cached\)$")


def steps(plain: str) -> list[tuple[str, bool]]:
    """(each build step's line, whether the engine took it from its cache) of a plain build log
    (hvd_container/cli/progress.py's plain lines)."""
    found: list[tuple[str, bool]] = []
    for line in plain.splitlines():
        if STEP.match(line):
            found.append((line, False))
        elif CACHED.match(line) and found:
            found[-1] = (found[-1][0], True)
    return found


def test_steps_parse_a_plain_log() -> None:
    log = "\n".join([
        format_plain("step", "base", "[1/3] FROM x AS horovod-wheel"),
        format_plain("cached", "base", "---> Using cache"),
        format_plain("step", "horovod", "[2/3] RUN make"),
        format_plain("log", "horovod", "g++ -c a.cc"),
    ])  # fmt: skip
    assert steps(log) == [
        ("[base] => [1/3] FROM x AS horovod-wheel", True),
        ("[horovod] => [2/3] RUN make", False),
    ]


def test_a_derived_recipe_with_one_more_package_reuses_the_compiled_horovod(
    api: Any, cpu_image: str, tmp_path: Path
) -> None:
    try:
        recipe, said = derived_recipe(tmp_path, NAME)
        assert "starting from the pins of the lock of the recipe it extends" in said
        built = hvd("build", str(recipe), "--progress", "plain")
        assert built.returncode == 0, built.stderr
        found = steps(built.stdout)
        compile_step = [s for s in found if "hvd-pip wheel" in s[0]]
        assert compile_step and all(cached for _, cached in compile_step), found
        install = [s for s in found if "/opt/hvd/wheels/horovod-" in s[0] and "RUN" in s[0]]
        assert install and not any(cached for _, cached in install), found  # a new lock below
        assert output_of(api, f"{NAME}:1", "command -v g++ || true") == ""  # no compiler
        # the image's facts name the wheel it installed. (Not compared with the parent image's:
        # a wheel is not bit-for-bit reproducible, and a machine that compiled the same inputs
        # twice has both in its cache; the cached compile step is the proof nothing compiled.)
        digest = "sha256:" + output_of(api, f"{NAME}:1", f"sha256sum {WHEELS} | cut -d' ' -f1")
        assert len(digest) == len("sha256:") + 64
        labels = api.inspect_image(f"{NAME}:1")["Config"]["Labels"]
        assert labels["org.hvd-container.versions.horovod.wheel"] == digest
    finally:
        import docker.errors

        with contextlib.suppress(docker.errors.ImageNotFound, docker.errors.APIError):
            api.remove_image(f"{NAME}:1")


def derived_recipe(tmp_path: Path, name: str) -> tuple[Path, str]:
    """A recipe extending cpu-bookworm with one more pip package, locked from its pins; what
    `lock` said."""
    recipe = tmp_path / f"{name}.yaml"
    parent = ROOT / "recipes" / f"{CPU_RECIPE}.yaml"
    recipe.write_text(f"extends: {parent}\nname: {name}\npip:\n  - numpy==2.4.6\n  - rich\n")
    locked = hvd("lock", str(recipe))
    assert locked.returncode == 0, locked.stderr
    return recipe, locked.stdout + locked.stderr


def json_build(*args: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The records of `build --json` and its result record."""
    built = hvd("build", *args, "--json")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr
    records = [json.loads(line) for line in built.stdout.splitlines() if line.startswith("{")]
    return records, next(r for r in records if r.get("event") == "result")


def test_the_wheel_travels_through_the_registry_and_a_build_without_it_pulls_it(
    api: Any, cpu_image: str, local_registry: str, tmp_path: Path
) -> None:
    import docker.errors

    name = "hvd-test-wheel-cache"
    registry = f"{local_registry}/wheels{uuid.uuid4().hex[:8]}"  # nothing there yet
    recipe, _said = derived_recipe(tmp_path, name)
    wheel_ref = ""
    try:
        _records, first = json_build(str(recipe), "--wheel-cache", registry)
        wheel = first["horovod_wheel"]
        wheel_ref = wheel["image"]
        assert wheel["source"] == "built" and wheel_ref.startswith(f"{registry}/horovod-wheel:")
        served = api.inspect_distribution(wheel_ref)["Descriptor"]["digest"]
        assert wheel["pushed"] == served  # the registry has it
        # another machine: neither the wheel's image nor the recipe's in the engine
        api.remove_image(wheel_ref)
        api.remove_image(f"{name}:1")
        records, second = json_build(str(recipe), "--wheel-cache", registry)
        assert second["horovod_wheel"] == {"image": wheel_ref, "source": "pulled", "pushed": None}
        texts = [r.get("text", "") for r in records]
        assert not [t for t in texts if "hvd-pip wheel" in t], "a compile step ran"
        assert any(f"FROM {wheel_ref} AS horovod-wheel" in t for t in texts), texts[:40]
        # the image installed the pulled wheel: the same file as the build that pushed it
        label = "org.hvd-container.versions.horovod.wheel"
        assert second["labels"][label] == first["labels"][label]
        assert output_of(api, f"{name}:1", "command -v g++ || true") == ""
    finally:
        for ref in (f"{name}:1", wheel_ref):
            with contextlib.suppress(docker.errors.ImageNotFound, docker.errors.APIError):
                if ref:
                    api.remove_image(ref)
