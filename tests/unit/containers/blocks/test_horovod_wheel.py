"""Horovod's wheel stage: its instructions and files depend on what the compile reads, only.

The engine's layer cache reuses a step when the steps before it and the files they copy are the
same: so a derived recipe reuses the compiled Horovod exactly when everything up to the compile
renders to the same bytes. These tests compare those bytes between two recipes.
"""

from __future__ import annotations

from hvd_container.containers.blocks import horovod_wheel, render_stages
from hvd_container.containers.lockfile import closure, grammar_problem, parse_lock
from hvd_container.containers.recipe import LockedRecipe
from hvd_container.containers.recipe_loader import load_recipe
from hvd_container.containers.render import docker_build, render_definition

COMPILE = "--no-build-isolation"  # on the line that compiles Horovod, in both shapes


def up_to_the_compile(recipe: LockedRecipe) -> tuple[str, dict[str, bytes]]:
    """The Dockerfile up to the line that compiles Horovod, and the files copied before it:
    what decides whether the engine's cache hands back the compiled Horovod."""
    build = docker_build(recipe)
    text = build.dockerfile
    before = text[: text.index(COMPILE)]
    before = before[before.index("\n# hvd-container phase") :]  # not the header comment
    copied = {
        line.split()[1]: build.context[line.split()[1]]
        for line in before.splitlines()
        if line.startswith("COPY ") and not line.startswith("COPY --from")
    }
    return before, copied


def with_lock(recipe: LockedRecipe, lock: str, **changes: object) -> LockedRecipe:
    changed = recipe.model_copy(update=changes)
    return LockedRecipe.of(changed, lock)


def extra_entry(name: str, version: str) -> str:
    return f"{name}=={version} \\\n    --hash=sha256:{'ab' * 32}\n    # via -r -\n"


def test_a_derived_recipe_with_one_more_package_compiles_nothing() -> None:
    parent = load_recipe("cpu-bookworm")
    assert parent.lock is not None
    # the derived recipe's lock: another header (its inputs), one more package, a new note
    lock = parent.lock.replace("inputs sha256:", "inputs sha256:0") + extra_entry("rich", "14.0.0")
    lock = lock.replace("    # via torch\n", "    # via rich, torch\n", 1)
    child = with_lock(parent, lock, name="with-rich", pip=[*parent.pip, "rich==14.0.0"])
    assert (
        docker_build(child).context["requirements.lock"]
        != (docker_build(parent).context["requirements.lock"])
    )
    assert up_to_the_compile(child) == up_to_the_compile(parent)


def test_a_changed_framework_or_flag_compiles_again() -> None:
    parent = load_recipe("cpu-bookworm")
    assert parent.lock is not None and parent.horovod is not None
    newer_torch = parent.lock.replace("torch==2.13.0+cpu", "torch==2.13.1+cpu")
    assert newer_torch != parent.lock
    assert up_to_the_compile(with_lock(parent, newer_torch)) != up_to_the_compile(parent)
    gloo_only = parent.horovod.model_copy(update={"controllers": ["gloo"]})
    assert up_to_the_compile(with_lock(parent, parent.lock, horovod=gloo_only)) != (
        up_to_the_compile(parent)
    )


def test_the_stage_installs_what_the_compile_reads_and_no_more() -> None:
    recipe = load_recipe("cpu-bookworm")
    assert recipe.lock is not None
    build_lock = horovod_wheel.build_lock(recipe)
    assert grammar_problem(build_lock) is None and "#" not in build_lock
    names = set(parse_lock(build_lock))
    assert {"torch", "filelock", "sympy", "mpmath", "setuptools", "wheel"} <= names
    # Horovod's own runtime packages and the rest of the lock come with the image's lock
    assert "horovod" not in names and "cffi" not in names and "numpy" not in names
    assert names < set(parse_lock(recipe.lock))


def test_the_closure_follows_via_notes_down_and_keeps_the_locks_order() -> None:
    lock = (
        "# header\n"
        + extra_entry("a", "1").replace("-r -", "b")
        + extra_entry("b", "1").replace("-r -", "c, x")
        + extra_entry("c", "1")
        + extra_entry("d", "1")
    )
    assert [*parse_lock(closure(lock, ["c"]))] == ["a", "b", "c"]
    assert [*parse_lock(closure(lock, ["d", "nothing"]))] == ["d"]


def test_the_image_installs_the_stages_wheel_and_has_no_compiler() -> None:
    recipe = load_recipe("cpu-bookworm")
    deps, wheel, image = render_stages(recipe)
    assert (deps.name, wheel.name, image.name) == ("horovod-deps", "horovod-wheel", None)
    text = docker_build(recipe).dockerfile
    assert "FROM hvd-base/debian:bookworm AS horovod-deps\n" in text
    assert "FROM horovod-deps AS horovod-wheel\n" in text
    image_part = text[text.index("\nFROM horovod-deps\n") :]
    # torch came with the first stage: the image's lock install finds it there
    assert "/opt/hvd/horovod-build.lock" not in image_part
    assert "COPY --from=horovod-wheel /opt/hvd/wheels/ /opt/hvd/wheels/" in image_part
    assert "/opt/hvd/wheels/horovod-0.28.1-*.whl" in image_part
    assert COMPILE not in image_part and "g++" not in image_part
    # a definition file keeps the compile in its one %post (Apptainer caches no stage)
    definition = render_definition(recipe)
    assert COMPILE in definition and "--from" not in definition


def test_an_unlocked_recipe_or_one_without_horovod_has_one_stage() -> None:
    assert len(render_stages(load_recipe("cpu-bookworm-torch"))) == 1
    locked = load_recipe("cpu-bookworm")
    assert len(render_stages(LockedRecipe.of(locked, None))) == 1
