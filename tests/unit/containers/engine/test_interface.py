"""The engine interface's own helpers (containers/engine/__init__.py), which every backend's
callers use instead of reaching into the Docker backend."""

from __future__ import annotations

import docker.auth
import pytest
from hvd_container.containers.engine import (
    EngineError,
    EngineUnreachable,
    engine_errors,
    registry_auth_header,
)

from hvd_container.core.errors import StepFailed


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (EngineError("no such image: x\nmore"), "the container engine failed: no such image: x"),
        (
            EngineUnreachable("read timed out", timed_out=True),
            "did not answer in time: read timed out",
        ),
        (
            EngineUnreachable("connection refused"),
            "stopped answering: connection refused (start it",
        ),
        (
            EngineUnreachable("refused", said="cannot reach the Docker engine at x"),
            "cannot reach the Docker engine at x",
        ),
    ],
)
def test_engine_errors_become_one_line(error: EngineError, said: str) -> None:
    with pytest.raises(StepFailed) as caught, engine_errors():
        raise error
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_engine_errors_let_everything_else_through() -> None:
    with pytest.raises(KeyError), engine_errors():
        raise KeyError("x")


@pytest.mark.parametrize(
    "auth",
    [
        {"username": "u", "password": "p"},
        {"username": "ünï", "password": "p/+=?", "serveraddress": "localhost:5000"},
    ],
)
def test_the_auth_header_is_the_one_docker_py_sends(auth: dict[str, str]) -> None:
    assert registry_auth_header(auth) == docker.auth.encode_header(auth).decode()
