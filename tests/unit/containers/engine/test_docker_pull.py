"""The Docker backend's pull: a tag the registry does not have is False (the wheel cache then
compiles), any other failure an EngineError with the registry's words. The stand-in for
docker.APIClient (FAKE) answers as the engine does: an HTTP error before the stream starts, or
an error record inside it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import docker.errors
import pytest
from hvd_container.containers.engine import EngineError
from hvd_container.containers.engine.docker_api import DockerEngine


class PullingAPI:
    """FAKE docker.APIClient.pull: answers with `records`, or raises `error` at the request."""

    def __init__(self, records: list[dict[str, Any]], error: Exception | None = None) -> None:
        self.records = records
        self.error = error
        self.calls: list[tuple[str, str, Any]] = []

    def pull(self, repository: str, tag: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append((repository, tag, kwargs.get("auth_config")))
        if self.error is not None:
            raise self.error
        return iter(self.records)


def test_a_pulled_tag_is_true_and_the_credentials_reach_the_engine() -> None:
    api = PullingAPI([{"status": "Pulling fs layer", "id": "a1"}, {"status": "Downloaded"}])
    auth = {"username": "u", "password": "p"}
    assert DockerEngine(api).pull("r:5000/t/horovod-wheel", "k1", auth) is True
    assert api.calls == [("r:5000/t/horovod-wheel", "k1", auth)]


@pytest.mark.parametrize(
    "api",
    [
        PullingAPI([], docker.errors.NotFound("manifest for r/x:k not found: manifest unknown")),
        PullingAPI([{"error": "manifest unknown: manifest unknown"}]),
        PullingAPI([], docker.errors.APIError("pull access denied, repository does not exist")),
    ],
)
def test_a_tag_the_registry_does_not_have_is_false(api: PullingAPI) -> None:
    assert DockerEngine(api).pull("r/x", "k", None) is False


def test_any_other_failure_is_an_engine_error_with_the_registrys_words() -> None:
    api = PullingAPI([{"errorDetail": {"message": "unauthorized: authentication required"}}])
    with pytest.raises(EngineError, match="unauthorized: authentication required"):
        DockerEngine(api).pull("r/x", "k", None)
    refused = PullingAPI([], docker.errors.APIError("Get https://r/v2/: connection refused"))
    with pytest.raises(EngineError, match="connection refused"):
        DockerEngine(refused).pull("r/x", "k", None)
