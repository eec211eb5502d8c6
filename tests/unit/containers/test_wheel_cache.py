"""Horovod's wheel shared through a registry (containers/wheel_cache.py), through the FAKE
protocol-level engine of tests/unit/_fakes.py: its registry is a dict that pushes fill and
pulls read. The real round trip (Docker and the local registry) is tests/e2e/test_horovod_stage.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from _fakes import BASE, FakeEngine, good_image
from hvd_container.containers.build import BuildOptions, build_recipe
from hvd_container.containers.engine import EngineError
from hvd_container.containers.recipe import LockedRecipe
from hvd_container.containers.recipe_loader import load_recipe
from hvd_container.containers.render import build_digest, wheel_build
from hvd_container.containers.wheel_cache import wheel_repository

from hvd_container.core.errors import UserError

REGISTRY = "registry.example:5000/team"
COMPILE = "hvd-pip wheel"  # the compile's line in the Dockerfile
WHEELS = f"{REGISTRY}/horovod-wheel"


def engine_with_base() -> FakeEngine:
    return FakeEngine({BASE: {"Id": "sha256:base"}}, run=good_image)


def build(
    engine: FakeEngine,
    recipe: LockedRecipe | None = None,
    no_cache: bool = False,
    said: list[str] | None = None,
) -> Any:
    notes = said if said is not None else []
    return build_recipe(
        recipe or load_recipe("cpu-bookworm"),
        lambda kind, phase, text: notes.append(text),
        BuildOptions(use_host_pip=False, wheel_cache=REGISTRY, no_cache=no_cache),
        engine=engine,
    )


def dockerfiles(engine: FakeEngine) -> list[tuple[str, str]]:
    """(tag, Dockerfile) of every build the engine was asked for, labelling builds left out."""
    return [(tag, text) for tag, text in engine.contexts if not text.startswith("FROM sha256:")]


def with_rich(parent: LockedRecipe) -> LockedRecipe:
    """A derived recipe: one more pip package, its lock the parent's pins and that package."""
    assert parent.lock is not None
    entry = f"rich==14.0.0 \\\n    --hash=sha256:{'ab' * 32}\n    # via -r -\n"
    lock = parent.lock.replace("inputs sha256:", "inputs sha256:0") + entry
    changed = parent.model_copy(update={"name": "with-rich", "pip": [*parent.pip, "rich==14.0.0"]})
    return LockedRecipe.of(changed, lock)


def test_a_build_that_compiled_shares_the_wheel_and_the_image_starts_from_it() -> None:
    engine = engine_with_base()
    result = build(engine)
    wheel = result.wheel
    assert wheel is not None and wheel.source == "built" and wheel.repository == WHEELS
    (carrier_tag, carrier), (_, image) = dockerfiles(engine)
    assert carrier_tag == wheel.image and COMPILE in carrier  # the compile, tagged by its key
    assert carrier.rstrip().endswith("COPY --from=horovod-wheel /opt/hvd/wheels/ /opt/hvd/wheels/")
    assert COMPILE not in image and f"FROM {wheel.image} AS horovod-wheel" in image
    assert wheel.image in engine.registry and wheel.pushed  # shared once the image verified
    assert result.tag == "cpu-bookworm:1" and engine.inspect("cpu-bookworm:1") is not None


def test_a_colleague_with_the_same_inputs_pulls_the_wheel_and_compiles_nothing() -> None:
    first = engine_with_base()
    build(first)
    elsewhere = engine_with_base()  # another machine: the same base, the same registry
    elsewhere.registry = first.registry
    said: list[str] = []
    result = build(elsewhere, with_rich(load_recipe("cpu-bookworm")), said=said)
    assert result.wheel.source == "pulled" and elsewhere.pulled == [result.wheel.image]
    assert [tag for tag, _ in dockerfiles(elsewhere)] == [""]  # the image only: no compile
    assert all(COMPILE not in text for _, text in dockerfiles(elsewhere))
    assert any("pulled" in line and "nothing compiles" in line for line in said), said
    assert elsewhere.pushed == []  # it made nothing new to share


def test_the_wheel_in_the_engine_is_neither_pulled_nor_built() -> None:
    engine = engine_with_base()
    build(engine)
    engine.images.pop("cpu-bookworm:1")  # the image gone, the wheel image still there
    again = build(engine)
    assert again.wheel.source == "engine" and engine.pulled == [again.wheel.image]  # 1st only


def test_the_key_is_the_compiles_inputs_only() -> None:
    parent = load_recipe("cpu-bookworm")
    assert parent.lock is not None
    wheel, child = wheel_build(parent), wheel_build(with_rich(parent))
    assert wheel is not None and child is not None
    assert build_digest(wheel.context, "sha256:base") == build_digest(child.context, "sha256:base")
    newer = LockedRecipe.of(parent, parent.lock.replace("torch==2.13.0+cpu", "torch==2.13.1+cpu"))
    changed = wheel_build(newer)
    assert changed is not None
    assert build_digest(changed.context, "sha256:base") != build_digest(
        wheel.context, "sha256:base"
    )
    # another base (a remade debootstrap image, another architecture) is another key
    assert build_digest(wheel.context, "sha256:other") != build_digest(wheel.context, "sha256:base")


def test_a_changed_torch_compiles_again_beside_the_shared_wheel() -> None:
    first = engine_with_base()
    build(first)
    parent = load_recipe("cpu-bookworm")
    assert parent.lock is not None
    newer = LockedRecipe.of(parent, parent.lock.replace("torch==2.13.0+cpu", "torch==2.13.1+cpu"))
    second = engine_with_base()
    second.registry = first.registry
    result = build(second, newer)
    assert result.wheel.source == "built" and len(first.registry) == 2
    assert COMPILE in dockerfiles(second)[0][1]


def test_no_cache_looks_for_nothing_and_replaces_the_shared_wheel() -> None:
    engine = engine_with_base()
    first = build(engine)
    pulled_before = list(engine.pulled)
    again = build(engine, no_cache=True)
    assert engine.pulled == pulled_before  # neither the engine's copy nor the registry's
    assert again.wheel.source == "built" and engine.pushed.count(first.wheel.image) == 2


def test_a_registry_that_fails_is_reported_and_the_wheel_compiles_here() -> None:
    engine = engine_with_base()
    engine.pull_error = EngineError("Get https://registry.example:5000/v2/: connection refused")
    said: list[str] = []
    result = build(engine, said=said)
    assert result.wheel.source == "built"
    assert any("cannot pull" in line and "connection refused" in line for line in said), said


def test_a_refused_push_of_the_wheel_leaves_the_built_image() -> None:
    engine = engine_with_base()
    engine.push_error = "denied: requested access to the resource is denied"
    said: list[str] = []
    result = build(engine, said=said)
    assert result.wheel.pushed is None and engine.inspect("cpu-bookworm:1") is not None
    assert any("not shared" in line and "denied" in line for line in said), said


def test_a_recipe_without_horovod_has_no_wheel() -> None:
    recipe = load_recipe("cpu-bookworm")
    without = LockedRecipe.of(recipe.model_copy(update={"horovod": None}), recipe.lock)
    engine = engine_with_base()
    options = BuildOptions(use_host_pip=False, wheel_cache=REGISTRY, verify=False)
    result = build_recipe(without, lambda *_: None, options, engine=engine)
    assert result.wheel is None and engine.pulled == [] and len(dockerfiles(engine)) == 1


@pytest.mark.parametrize("registry", ["a b", "Registry.example/Team", "r.example/../x", ""])
def test_a_wheel_cache_outside_the_reference_grammar_is_refused(registry: str) -> None:
    with pytest.raises(UserError, match="^--wheel-cache '"):
        wheel_repository(registry, "--wheel-cache")
