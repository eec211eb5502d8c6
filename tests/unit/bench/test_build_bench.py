"""bench/build.py's bookkeeping, with its builds and the Docker client replaced by FAKES: what
it prints with --skip-cold and which images it removes at the end."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _bench_scripts import load_bench
from _fakes import FakeDockerAPI


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module = load_bench("build.py")
    monkeypatch.setattr(module.subprocess, "run", lambda *a, **k: None)  # testbed scripts
    return module


def run_bench(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, api: FakeDockerAPI, *argv: str
) -> int:
    """bench.main() with FAKE builds: each build tags a new image id in the fake client."""
    counter = iter(range(100))

    def fake_build(ref: str, no_cache: bool = False) -> tuple[float, str, str]:
        name = Path(ref).stem if ref.endswith(".yaml") else ref
        tag = f"{name}:1"
        if not no_cache and ref == "cpu-bookworm" and tag in api.images:
            return 1.0, "cache hit", api.images[tag]["Id"]
        image_id = f"sha256:{next(counter)}"
        for info in api.images.values():  # the tag moves to the new image
            info["RepoTags"] = [t for t in info.get("RepoTags", []) if t != tag]
        api.images[image_id] = {"Id": image_id, "RepoTags": [tag], "Size": 5e8}
        api.images[tag] = api.images[image_id]
        return (100.0 if no_cache else 5.0), "built", image_id

    monkeypatch.setattr(bench, "timed_build", fake_build)
    monkeypatch.setattr("hvd_container.containers.engine.docker_api.docker_client", lambda: api)
    monkeypatch.setattr(sys, "argv", ["bench/build.py", *argv])
    return bench.main()


def cpu_image() -> dict[str, Any]:
    return {"Id": "sha256:cpu", "RepoTags": ["cpu-bookworm:1"], "Size": 5e8}


def test_skip_cold_prints_no_ratio_and_removes_what_it_made(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeDockerAPI({"cpu-bookworm:1": cpu_image(), "sha256:cpu": cpu_image()})
    assert run_bench(bench, monkeypatch, api, "--skip-cold") == 0
    out = capsys.readouterr().out
    assert "cold build" not in out.split("\n")[0]
    assert "build (layer cache used, not cold)" in out
    ratio = next(line for line in out.splitlines() if line.startswith("rebuild / cold"))
    assert "n/a" in ratio and "%" not in ratio
    # the bench tag and both bench images are gone; the recipe's image is untouched
    assert api.removed_images == ["cpu-bookworm-bench:1", "sha256:0"]
    assert not any(ref.startswith("cpu-bookworm-bench") for ref in api.images)
    assert set(api.images) == {"cpu-bookworm:1", "sha256:cpu"}
    assert "sha256:cpu" not in api.removed_images


def test_cold_run_prints_the_ratio_and_drops_the_image_it_untagged(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeDockerAPI({"cpu-bookworm:1": cpu_image(), "sha256:cpu": cpu_image()})
    assert run_bench(bench, monkeypatch, api) == 0
    out = capsys.readouterr().out
    assert "rebuild / cold                                5.0 %   (target < 10 %)" in out
    # the old recipe image (untagged by the cold build) goes; the new one stays
    assert api.removed_images == ["cpu-bookworm-bench:1", "sha256:cpu", "sha256:1"]
    assert set(api.images) == {"cpu-bookworm:1", "sha256:0"}
