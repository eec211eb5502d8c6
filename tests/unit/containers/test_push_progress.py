"""Push-stream error detection, registry references and progress formatting."""

from __future__ import annotations

import json

import docker.errors
import pytest
from _fakes import FakeDockerAPI
from hvd_container.containers.engine.docker_api import BuildFailed, DockerEngine
from hvd_container.containers.push import push_image, remote_ref, split_tag, stream_errors

from hvd_container.cli.progress import (
    JsonReporter,
    PlainReporter,
    format_json,
    format_plain,
)
from hvd_container.core.errors import StepFailed, UserError

ALLOWED = (
    " (a host name or address, and lower-case path components of letters and digits "
    "joined by '.', '_', '__' or '-')"
)


def test_error_in_a_200_push_stream_is_found() -> None:
    chunks = [
        {"status": "The push refers to repository [127.0.0.1:5000/x]"},
        {"status": "Preparing", "id": "abc"},
        {
            "errorDetail": {"message": "denied: requested access to the resource is denied"},
            "error": "denied: requested access to the resource is denied",
        },
    ]
    assert stream_errors(chunks) == ("denied: requested access to the resource is denied", None)


def test_successful_push_stream_gives_digest() -> None:
    chunks = [
        {"status": "Pushed", "id": "abc"},
        {"status": "1: digest: sha256:ff size: 529"},
        {"aux": {"Tag": "1", "Digest": "sha256:ff", "Size": 529}},
    ]
    assert stream_errors(chunks) == (None, "sha256:ff")


@pytest.mark.parametrize(
    ("image", "registry", "expected"),
    [
        ("cpu-bookworm:1", "127.0.0.1:5000", ("127.0.0.1:5000/cpu-bookworm", "1")),
        ("cpu-bookworm:1", "http://r.example:5000/", ("r.example:5000/cpu-bookworm", "1")),
        ("cpu-bookworm", "reg/team", ("reg/team/cpu-bookworm", "latest")),
        ("old.io:5000/a/b:2", "127.0.0.1:5000", ("127.0.0.1:5000/a/b", "2")),
    ],
)
def test_remote_ref(image: str, registry: str, expected: tuple[str, str]) -> None:
    assert remote_ref(image, registry) == expected


def test_bad_registry_is_a_one_line_error() -> None:
    with pytest.raises(UserError, match="--registry"):
        remote_ref("x:1", "   ")


def test_split_tag_keeps_registry_port() -> None:
    assert split_tag("127.0.0.1:5000/x") == ("127.0.0.1:5000/x", "latest")


def test_plain_lines_carry_the_phase() -> None:
    assert format_plain("step", "mpi", "[7/22] RUN apt-get") == "[mpi] => [7/22] RUN apt-get"
    assert format_plain("log", "horovod", "compiling") == "[horovod]    compiling"
    assert format_plain("cached", "done", "x:1 is up to date") == "[cache] x:1 is up to date"


def test_json_lines_are_parseable(capsys: pytest.CaptureFixture[str]) -> None:
    assert json.loads(format_json("log", "frameworks", "é", 1.23456)) == {
        "event": "log",
        "phase": "frameworks",
        "text": "é",
        "elapsed": 1.235,
    }
    rep = JsonReporter()
    rep("step", "mpi", "RUN false")
    rep.failure(BuildFailed("boom", 3, 9, "RUN false", ["a", "b"]))
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["event"] == "step"
    error = lines[1]
    assert isinstance(error.pop("elapsed"), float)
    assert error == {
        "event": "error",
        "phase": "mpi",  # the phase of the failing step
        "text": "build failed at step 3/9 `RUN false`: boom",
        "problems": ["build failed at step 3/9 `RUN false`: boom"],
        "details": [
            {
                "file": None,
                "line": None,
                "key": None,
                "text": error["text"],
                "message": "build failed at step 3/9 `RUN false`: boom",
            }
        ],
        "exit_code": 1,
        "step": 3,
        "instruction": "RUN false",
        "tail": ["a", "b"],
    }


def test_plain_failure_prints_the_tail(capsys: pytest.CaptureFixture[str]) -> None:
    PlainReporter().failure(BuildFailed("boom", 1, 1, "RUN x", ["out1", "out2"]))
    err = capsys.readouterr().err
    assert "last 2 lines of the failing step" in err and "    out2" in err


PUSHED = "sha256:" + "cd" * 32


def pushing_api() -> FakeDockerAPI:
    api = FakeDockerAPI({"cpu-bookworm:1": {"Id": "sha256:1"}})
    api.push_stream = [
        {"status": "Pushed", "id": "abc"},
        {"aux": {"Tag": "1", "Digest": PUSHED, "Size": 529}},
    ]
    api.distribution = {"Descriptor": {"mediaType": "x", "digest": PUSHED, "size": 529}}
    return api


def test_push_reads_the_digest_back_through_the_engine() -> None:
    api = pushing_api()
    result = push_image(DockerEngine(api), "cpu-bookworm:1", "registry.example/team")
    assert result.remote == "registry.example/team/cpu-bookworm:1"
    assert result.digest == PUSHED
    assert api.pushed == [("registry.example/team/cpu-bookworm", "1")]


def test_read_back_refused_by_the_registry_is_one_line() -> None:
    api = pushing_api()
    api.distribution = docker.errors.APIError(
        "401", explanation="errors:\nunauthorized: authentication required\n"
    )
    with pytest.raises(StepFailed) as info:
        push_image(DockerEngine(api), "cpu-bookworm:1", "r.example")
    assert str(info.value) == (
        "pushed r.example/cpu-bookworm:1, but cannot read it back: "
        "errors: unauthorized: authentication required"
    )


def test_registry_serving_another_digest_fails() -> None:
    api = pushing_api()
    api.distribution = {"Descriptor": {"digest": "sha256:other"}}
    with pytest.raises(StepFailed, match="but the registry serves sha256:other$"):
        push_image(DockerEngine(api), "cpu-bookworm:1", "r.example")


def test_bad_registry_flag_fails_before_the_engine_is_contacted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hvd_container.cli.app import main

    def no_engine() -> None:
        raise AssertionError("the Docker engine was contacted")

    monkeypatch.setattr("hvd_container.containers.engine.docker_api.docker_client", no_engine)
    assert main(["push", "cpu-bookworm:1", "--registry", " "]) == 2
    assert main(["build", "cpu-bookworm", "--push", "a b"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "hvd-container: error: --registry ' ': expected HOST[:PORT][/NAMESPACE]" + ALLOWED,
        "hvd-container: error: --push 'a b': expected HOST[:PORT][/NAMESPACE]" + ALLOWED,
    ]


def test_push_stream_gives_layer_bytes_to_the_reporter() -> None:
    from hvd_container.containers.push import _progress
    from hvd_container.containers.transfer import Transfer

    # a stand-in for the engine's decoded push stream (the shape docker-py yields)
    stream = [
        {"status": "Preparing", "id": "aaa"},
        {"status": "Pushing", "id": "aaa", "progressDetail": {"current": 512, "total": 2048}},
        {"status": "Pushing", "id": "aaa", "progressDetail": {"current": 2048, "total": 2048}},
        {"status": "Pushed", "id": "aaa"},
        {"status": "Layer already exists", "id": "bbb"},
    ]
    notes: list[str] = []
    seen: list[Transfer] = []
    assert list(_progress(stream, notes.append, seen.append)) == stream
    assert [(t.item, t.done, t.total) for t in seen] == [
        ("aaa", 512, 2048), ("aaa", 2048, 2048), ("aaa", 2048, 2048)
    ]  # fmt: skip
    assert notes == ["aaa: Pushed", "bbb: Layer already exists"]
