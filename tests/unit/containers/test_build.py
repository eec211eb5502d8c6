"""build_recipe end to end against FAKE engines (no daemon).

The flow itself (build, verify, label, reuse) runs on the shared protocol-level FAKE engine
(tests/unit/_fakes.py: the Engine protocol, nothing of Docker). What the Docker backend
adds (containers removed, build args and the pip configuration server reaching the build)
runs on the Docker fakes of tests/unit/_fakes.py, which stand in for docker.APIClient and
the engine's build. The real
engine is exercised by tests/e2e/test_build_*.py.
"""

from __future__ import annotations

import inspect
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fakes import BASE, GOLDEN, NEW_ID, FakeDockerAPI, FakeDockerEngine, good_image
from _fakes import FakeEngine as ProtocolFake
from hvd_container.containers.blocks.base import debootstrap_image, debootstrap_script_args
from hvd_container.containers.build import (
    BUILD_DIGEST_LABEL,
    VERIFIED_LABEL,
    BuildOptions,
    build_digest,
    build_recipe,
    proxy_build_args,
)
from hvd_container.containers.engine import BuildEvent, Engine
from hvd_container.containers.pipconfig import HostPipConfig, server_secret
from hvd_container.containers.recipe import LockedRecipe
from hvd_container.containers.recipe_loader import load_recipe, read_recipe
from hvd_container.containers.render import build_context, docker_build

from hvd_container.core.errors import StepFailed, UserError


@pytest.fixture
def api() -> FakeDockerAPI:
    return FakeDockerAPI({BASE: {"Id": "sha256:base"}})


@pytest.fixture(autouse=True)
def no_host_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def build(
    api: FakeDockerAPI, options: BuildOptions, messages: list[tuple[str, str, str]] | None = None
) -> tuple[FakeDockerEngine, Any]:
    engine = FakeDockerEngine(api)
    sink = messages if messages is not None else []
    result = build_recipe(
        load_recipe("cpu-bookworm"),
        lambda kind, phase, text: sink.append((kind, phase, text)),
        options,
        engine=engine,
    )
    return engine, result


def flow(engine: ProtocolFake, messages: list[tuple[str, str, str]] | None = None) -> Any:
    """build_recipe of cpu-bookworm through the protocol-level FAKE engine."""
    sink = messages if messages is not None else []
    return build_recipe(
        load_recipe("cpu-bookworm"),
        lambda kind, phase, text: sink.append((kind, phase, text)),
        BuildOptions(use_host_pip=False),
        engine=engine,
    )


def test_the_fake_engine_is_the_engine_protocol() -> None:
    """Same methods, same parameters: the flow tests drive build_recipe through what any
    engine offers, not through docker-py."""
    for name, member in vars(Engine).items():
        if callable(member) and not name.startswith("_"):
            theirs = inspect.signature(getattr(ProtocolFake, name)).parameters
            assert list(theirs) == list(inspect.signature(member).parameters), name


def test_a_correct_image_is_labelled_and_tagged() -> None:
    # The control case for the next test: the same flow with a correct image gets its tag.
    engine = ProtocolFake({BASE: {"Id": "sha256:base"}}, run=good_image)
    result = flow(engine)
    assert result.tag == "cpu-bookworm:1" and engine.inspect("cpu-bookworm:1") is not None
    labels = engine.images["cpu-bookworm:1"]["Config"]["Labels"]
    assert (
        labels[VERIFIED_LABEL] == "true"
        and labels[BUILD_DIGEST_LABEL] == result.labels[BUILD_DIGEST_LABEL]
    )
    assert [tag for tag, _, _ in engine.builds] == ["", "cpu-bookworm:1"]  # built, then labelled
    assert ["horovodrun", "--check-build"] in engine.ran


def test_an_engine_whose_runtime_reads_elsewhere_gets_the_verified_image_there() -> None:
    engine = ProtocolFake({BASE: {"Id": "sha256:base"}}, run=good_image, runnable_elsewhere=True)
    messages: list[tuple[str, str, str]] = []
    result = flow(engine, messages)
    # the labelled, verified image under its tag: what podman-hpc migrates
    assert engine.made_runnable == [("cpu-bookworm:1", result.image_id)]
    assert ("info", "done", "cpu-bookworm:1 copied where the runtime reads it") in messages
    flow(engine, messages)  # up to date: not rebuilt, but made runnable again (a lost copy)
    assert engine.made_runnable == [("cpu-bookworm:1", result.image_id)] * 2


def test_a_failed_verification_is_never_made_runnable() -> None:
    bad = ProtocolFake({BASE: {"Id": "sha256:base"}}, run=lambda argv: (1, "no horovod"),
                       runnable_elsewhere=True)  # fmt: skip
    with pytest.raises(StepFailed):
        flow(bad)
    assert bad.made_runnable == []


def test_failed_verification_after_a_successful_build_withholds_the_tag(
    api: FakeDockerAPI,
) -> None:
    api.run = lambda argv: (
        (0, GOLDEN.read_text().replace("[X] Gloo", "[ ] Gloo"))
        if argv[0] == "horovodrun"
        else good_image(argv)
    )
    with pytest.raises(StepFailed) as info:
        build(api, BuildOptions(use_host_pip=False))
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        "verification of cpu-bookworm:1 failed: controllers missing: gloo; tensor ops missing: gloo"
    )
    assert "cpu-bookworm:1" not in api.images  # no tag
    assert api.label_builds == 0  # the labelling (tagging) build never ran
    assert api.removed_images == [NEW_ID]  # the untagged build result is gone
    assert api.live == {}  # every verification container removed


def test_host_proxies_and_pips_proxy_reach_the_build(
    api: FakeDockerAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://corp:8080")
    monkeypatch.setenv("no_proxy", ".corp")
    monkeypatch.setattr(
        "hvd_container.containers.pipconfig.read_host_pip_config",
        lambda: HostPipConfig(index_url="https://pypi.example/simple", proxy="http://pp:3128"),
    )
    engine, _ = build(api, BuildOptions(pip_config_port=0))
    args = engine.buildargs
    assert args["HVD_PIP_CONFIG_URL"].startswith("http://127.0.0.1:")
    assert args["HTTPS_PROXY"] == "http://corp:8080"
    assert args["http_proxy"] == "http://pp:3128"  # pip's `proxy`, for plain http
    assert "https_proxy" not in args  # the host's HTTPS_PROXY already covers https
    # the pip config server on the gateway is reached directly, never through the proxy
    assert args["NO_PROXY"] == args["no_proxy"] == ".corp,127.0.0.1"
    assert engine.pip_conf is not None
    assert "index-url = https://pypi.example/simple" in engine.pip_conf
    assert "proxy" not in engine.pip_conf  # pip's --proxy would ignore no_proxy


def test_proxy_build_args_pass_host_variables_as_they_are() -> None:
    env = {"http_proxy": "http://p:1", "HTTP_PROXY": "http://P:1", "PATH": "/bin"}
    assert proxy_build_args(env) == {"HTTP_PROXY": "http://P:1", "http_proxy": "http://p:1"}
    assert proxy_build_args({}) == {}
    # NO_PROXY alone, without a proxy, is passed but not extended
    assert proxy_build_args({"NO_PROXY": "a"}, bypass=["gw"]) == {"NO_PROXY": "a"}


def test_loopback_proxy_is_reported(api: FakeDockerAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", "127.0.0.1:3128")
    messages: list[tuple[str, str, str]] = []
    engine, _ = build(api, BuildOptions(use_host_pip=False), messages)
    assert engine.buildargs == {"http_proxy": "127.0.0.1:3128"}
    assert [m for m in messages if "loopback" in m[2]] == [
        (
            "info",
            "base",
            "http_proxy name a loopback address, which build containers cannot reach (use an "
            "address of this host they can reach, e.g. the Docker bridge gateway)",
        )
    ]


def test_taken_port_moves_to_the_next_one_and_says_the_cache_misses(
    api: FakeDockerAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "hvd_container.containers.pipconfig.read_host_pip_config", lambda: HostPipConfig()
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        messages: list[tuple[str, str, str]] = []
        engine, _ = build(api, BuildOptions(pip_config_port=port), messages)
    assert (
        engine.buildargs["HVD_PIP_CONFIG_URL"] == f"http://127.0.0.1:{port + 1}/{server_secret()}"
    )
    infos = [m[2] for m in messages if m[0] == "info"]
    assert infos == [
        f"port {port} is taken: the pip config is served on port {port + 1}, so pip layers "
        "cached with another port are rebuilt (set $HVD_PIP_CONFIG_PORT to keep it fixed)"
    ]


def test_missing_base_image_script_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HVD_BASE_IMAGE_SCRIPT", "/nonexistent/base-image.sh")
    api = FakeDockerAPI({})  # no base image yet: it would be made by the script
    with pytest.raises(UserError) as info:
        build(api, BuildOptions(use_host_pip=False))
    assert str(info.value) == (
        "$HVD_BASE_IMAGE_SCRIPT=/nonexistent/base-image.sh: no such file "
        "(unset it to use the default)"
    )


def test_an_arm64_debootstrap_base_is_made_for_arm64_under_its_own_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    called = tmp_path / "args"
    script = tmp_path / "base-image.sh"  # stand-in: records its arguments, makes nothing
    script.write_text(f'#!/bin/sh\necho "$@" > {called}\n')
    script.chmod(0o755)
    monkeypatch.setenv("HVD_BASE_IMAGE_SCRIPT", str(script))
    recipe = tmp_path / "arm.yaml"
    recipe.write_text("extends: cpu-bookworm\nname: arm\narch: arm64\n")
    messages: list[tuple[str, str, str]] = []
    with pytest.raises(UserError, match=r"made base image hvd-base/debian:bookworm-arm64 in the"):
        build_recipe(
            LockedRecipe.of(read_recipe(recipe), None),  # unlocked: the base comes first
            lambda kind, phase, text: messages.append((kind, phase, text)),
            BuildOptions(use_host_pip=False),
            engine=ProtocolFake({BASE: {"Id": "sha256:amd64-base"}}),  # the amd64 one only
        )
    assert called.read_text().split() == ["--arch", "arm64", "bookworm"]
    assert messages[0][2].startswith("making hvd-base/debian:bookworm-arm64 with debootstrap")


def test_the_debootstrap_image_of_each_architecture() -> None:
    assert debootstrap_image("bookworm", "amd64") == "hvd-base/debian:bookworm"  # as it was
    assert debootstrap_image("bookworm", "arm64") == "hvd-base/debian:bookworm-arm64"
    assert debootstrap_script_args("trixie", "amd64") == ["trixie"]
    assert debootstrap_script_args("trixie", "arm64") == ["--arch", "arm64", "trixie"]


def digest_label(api: FakeDockerAPI) -> str:
    return str(api.images["cpu-bookworm:1"]["Config"]["Labels"][BUILD_DIGEST_LABEL])


def test_unchanged_recipe_and_base_is_a_cache_hit() -> None:
    engine = ProtocolFake({BASE: {"Id": "sha256:base"}}, run=good_image)
    first, second = flow(engine), flow(engine)
    assert not first.cached and second.cached
    assert len(engine.builds) == 2  # nothing was built (or labelled) the second time


def test_remade_base_image_means_a_rebuild() -> None:
    engine = ProtocolFake({BASE: {"Id": "sha256:base"}}, run=good_image)
    flow(engine)
    before = engine.images["cpu-bookworm:1"]["Config"]["Labels"][BUILD_DIGEST_LABEL]
    engine.images[BASE] = {"Id": "sha256:remade"}  # as after `testbed/base-image.sh --force`
    messages: list[tuple[str, str, str]] = []
    result = flow(engine, messages)
    assert not result.cached and len(engine.builds) == 4
    assert not any("up to date" in text for _, _, text in messages)
    context = build_context(load_recipe("cpu-bookworm"))
    assert before == build_digest(context, "sha256:base")
    after = engine.images["cpu-bookworm:1"]["Config"]["Labels"][BUILD_DIGEST_LABEL]
    assert after == build_digest(context, "sha256:remade")


def test_host_pip_or_not_is_the_same_digest(
    api: FakeDockerAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --no-host-pip changes where pip downloads from, not what the recipe installs.
    monkeypatch.setattr(
        "hvd_container.containers.pipconfig.read_host_pip_config", lambda: HostPipConfig()
    )
    build(api, BuildOptions(pip_config_port=0))
    with_host_pip = digest_label(api)
    _, result = build(api, BuildOptions(use_host_pip=False))
    assert result.cached
    assert digest_label(api) == with_host_pip


def test_base_pulled_during_the_build_is_in_the_label_digest() -> None:
    recipe = load_recipe("lightning-pt113")  # a registry base: the engine pulls it if missing
    base = docker_build(recipe).base
    api = FakeDockerAPI({})
    engine = FakeDockerEngine(api)
    pulled = engine.build

    def pulling(*args: Any, **kwargs: Any) -> Iterator[BuildEvent]:
        api.images[base] = {"Id": "sha256:pulled"}
        yield from pulled(*args, **kwargs)

    engine.build = pulling  # type: ignore[method-assign]
    options = BuildOptions(verify=False, use_host_pip=False)
    build_recipe(recipe, lambda *_: None, options, engine)
    labels = api.images[recipe.image_tag]["Config"]["Labels"]
    assert labels[BUILD_DIGEST_LABEL] == build_digest(build_context(recipe), "sha256:pulled")
