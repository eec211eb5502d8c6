"""Settings for the fast tests, which need no engine."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def docker_engine_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow tests fake Docker's client: the engine is named, so `auto` never turns to a
    podman installed here when no Docker daemon answers (the tests of the choice pass their
    own environment)."""
    monkeypatch.setenv("HVD_ENGINE", "docker")
