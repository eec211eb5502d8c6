"""Failures of build/push/verify on the command line: one stderr line each, and in --json mode
one error record on stdout (phase, text, exit code). No engine is needed: the missing-daemon
case points DOCKER_HOST at a socket nobody listens on; the others use the FAKE Docker client
of tests/unit/_fakes.py, whose build answers with a classic-builder stream.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from _fakes import BASE, FakeDockerAPI

from hvd_container.cli.app import main

ROOT = Path(__file__).resolve().parents[3]

ALLOWED = (
    " (a host name or address, and lower-case path components of letters and digits "
    "joined by '.', '_', '__' or '-')"
)


def unreachable(sock: str) -> str:
    return (
        f"cannot reach the Docker engine at unix://{sock}: no daemon is listening "
        "(start your system's Docker service, e.g. `systemctl start docker`; in a source checkout of hvd-container, `testbed/docker.sh up` does it)"
    )


def records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def the_error(out: str) -> dict[str, Any]:
    """The last JSON line, which must be the only error record."""
    lines = records(out)
    assert [r["event"] for r in lines].count("error") == 1, out
    assert lines[-1]["event"] == "error", out
    return lines[-1]


def test_missing_daemon_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = f"{tmp_path}/no.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    assert main(["build", "cpu-bookworm", "--progress", "plain"]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"hvd-container: error: {unreachable(sock)}"]
    assert captured.out == ""


def test_missing_daemon_in_json_mode_prints_an_error_record(tmp_path: Path) -> None:
    # As a user runs it (a separate process): stdout carries exactly the error record.
    sock = f"{tmp_path}/no.sock"
    proc = subprocess.run(
        [sys.executable, "-m", "hvd_container", "build", "cpu-bookworm", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "DOCKER_HOST": f"unix://{sock}"},
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"hvd-container: error: {unreachable(sock)}"]
    (error,) = records(proc.stdout)
    assert error["event"] == "error"
    assert error["phase"] == "setup"  # before any build step
    assert error["text"] == unreachable(sock)
    assert error["exit_code"] == 2


@pytest.mark.parametrize(
    ("argv", "phase", "code", "text"),
    [
        (
            ["push", "cpu-bookworm:1", "--registry", " "],
            "push",
            2,
            "--registry ' ': expected HOST[:PORT][/NAMESPACE]" + ALLOWED,
        ),
        (
            ["build", "cpu-bookworm", "--push", "a b"],
            "setup",
            2,
            "--push 'a b': expected HOST[:PORT][/NAMESPACE]" + ALLOWED,
        ),
        (
            ["build", "cpu-bookworm", "--wheel-cache", "r.example/Team"],
            "setup",
            2,
            "--wheel-cache 'r.example/Team': expected HOST[:PORT][/NAMESPACE]" + ALLOWED,
        ),
        (
            ["build", "no-such-recipe"],
            "setup",
            2,
            "recipe 'no-such-recipe': no such file and no built-in recipe of that name",
        ),
        (["verify", "absent:1"], "verify", 2, "image absent:1 does not exist locally"),
    ],
)
def test_bad_input_in_json_mode_prints_an_error_record(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    phase: str,
    code: int,
    text: str,
) -> None:
    monkeypatch.setattr(
        "hvd_container.containers.engine.docker_api.docker_client",
        lambda: FakeDockerAPI({BASE: {"Id": "b"}}),
    )
    assert main([*argv, "--json"]) == code
    captured = capsys.readouterr()
    error = the_error(captured.out)
    assert (error["phase"], error["exit_code"]) == (phase, code)
    assert error["text"].startswith(text)
    assert captured.err.splitlines() == [f"hvd-container: error: {error['text']}"]


class FailingBuildAPI(FakeDockerAPI):
    """FAKE client whose image build streams like the classic builder and fails at step 2."""

    def __init__(self) -> None:
        super().__init__({BASE: {"Id": "sha256:base"}})
        self.interrupt = False

    def build(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield {"stream": f"Step 1/2 : FROM {BASE}\n"}
        yield {"stream": "Step 2/2 : RUN make mpi\n"}
        yield {"stream": "make: *** [mpi] Error 2\n"}
        if self.interrupt:
            raise KeyboardInterrupt
        yield {"error": "The command '/bin/sh -c make mpi' returned a non-zero code: 2"}


def run_build(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    api: FakeDockerAPI,
    *extra: str,
) -> tuple[int, str, str]:
    monkeypatch.setattr("hvd_container.containers.engine.docker_api.docker_client", lambda: api)
    code = main(["build", "cpu-bookworm", "--no-host-pip", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_failed_build_step_in_json_mode(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_build(monkeypatch, capsys, FailingBuildAPI(), "--json")
    assert code == 1
    error = the_error(out)
    assert error["step"] == 2 and error["instruction"] == "RUN make mpi"
    assert error["tail"] == ["make: *** [mpi] Error 2"]
    assert error["exit_code"] == 1
    assert error["phase"] == records(out)[-2]["phase"]  # that of the failing step's events
    assert error["text"] == (
        "build failed at step 2/2 `RUN make mpi`: "
        "The command '/bin/sh -c make mpi' returned a non-zero code: 2"
    )
    assert err.splitlines() == [f"hvd-container: error: {error['text']}"]


def test_interrupted_build_in_json_mode(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FailingBuildAPI()
    api.interrupt = True
    code, out, err = run_build(monkeypatch, capsys, api, "--progress", "json")
    assert code == 130
    error = the_error(out)
    assert (error["text"], error["exit_code"]) == ("interrupted", 130)
    assert err.splitlines() == ["hvd-container: interrupted"]


def test_engine_lost_mid_build_is_one_line_and_a_record(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeDockerAPI({BASE: {"Id": "sha256:base"}})

    def gone(ref: str) -> dict[str, Any]:
        raise requests.exceptions.ConnectionError("('Connection aborted.', FileNotFoundError())")

    api.inspect_image = gone  # type: ignore[method-assign]
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/x.sock")
    code, out, err = run_build(monkeypatch, capsys, api, "--json")
    assert code == 1
    message = (
        "cannot reach the Docker engine at unix:///run/x.sock: no daemon is listening "
        "(start your system's Docker service, e.g. `systemctl start docker`; in a source checkout of hvd-container, `testbed/docker.sh up` does it)"
    )
    assert err.splitlines() == [f"hvd-container: error: {message}"]
    assert the_error(out)["text"] == message


def test_plain_mode_prints_no_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_build(monkeypatch, capsys, FailingBuildAPI(), "--progress", "plain")
    assert code == 1
    assert '"event"' not in out
    assert err.splitlines()[-1].startswith("hvd-container: error: build failed at step 2/2")
