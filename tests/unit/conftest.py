"""Settings for the fast tests, which need no engine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _fake_slurm import FakeSlurm
from _gpg_keys import keys, signer  # noqa: F401 (fixtures: throw-away OpenPGP keys)
from hvd_container.launcher import slurm


@pytest.fixture(autouse=True)
def docker_engine_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow tests fake Docker's client: the engine is named, so `auto` never turns to a
    podman installed here when no Docker daemon answers (the tests of the choice pass their
    own environment)."""
    monkeypatch.setenv("HVD_ENGINE", "docker")


@pytest.fixture
def fake_slurm() -> Iterator[FakeSlurm]:
    """A fake Slurm in the real one's place (launcher/slurm.py's seam) while the test runs."""
    with slurm.using(FakeSlurm()) as fake:
        yield fake  # type: ignore[misc]
