"""Push credentials: $HVD_REGISTRY_USERNAME/PASSWORD or the Docker config reach the engine's
push (and read-back) auth, and never appear in any output or error message.

Two stand-ins, as no engine runs in the fast suite:
- FakeDockerAPI (tests/unit/_fakes.py): a FAKE docker.APIClient that records each auth_config;
- FakeEngineHTTP below: a FAKE Docker engine answering the HTTP API on a unix socket, so that
  docker-py's real APIClient (its Docker config loading, X-Registry-Auth header) is exercised.
"""

from __future__ import annotations

import base64
import http.server
import json
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import docker.errors
import pytest
from _fakes import FakeDockerAPI
from hvd_container.containers.engine.docker_api import DockerEngine
from hvd_container.containers.push import auth_from_env, push_image, redact

from hvd_container.cli.app import main
from hvd_container.core.errors import StepFailed, UserError

USER = "hvd-user-7Q"
PASSWORD = "s3cr3t-Pa55+/="
DIGEST = "sha256:" + "cd" * 32
IMAGE = "cpu-bookworm:1"
REGISTRY = "r.example:5000"
REMOTE = f"{REGISTRY}/cpu-bookworm:1"


def secrets_of(user: str, password: str) -> list[str]:
    """The credentials as given and as request headers carry them."""
    auth = {"username": user, "password": password}
    return [
        user,
        password,
        base64.urlsafe_b64encode(json.dumps(auth).encode()).decode(),  # X-Registry-Auth
        base64.b64encode(f"{user}:{password}".encode()).decode(),  # HTTP Basic
    ]


def assert_no_secret(text: str, user: str = USER, password: str = PASSWORD) -> None:
    for secret in secrets_of(user, password):
        assert secret not in text


@pytest.fixture
def env_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HVD_REGISTRY_USERNAME", USER)
    monkeypatch.setenv("HVD_REGISTRY_PASSWORD", PASSWORD)


def recording_api() -> FakeDockerAPI:
    api = FakeDockerAPI({IMAGE: {"Id": "sha256:1"}})
    api.push_stream = [{"status": "Pushed", "id": "abc"}, {"aux": {"Tag": "1", "Digest": DIGEST}}]
    api.distribution = {"Descriptor": {"digest": DIGEST}}
    return api


def test_env_credentials_reach_push_and_read_back(env_credentials: None) -> None:
    api = recording_api()
    result = push_image(DockerEngine(api), IMAGE, REGISTRY)
    assert result.digest == DIGEST
    wanted = {"username": USER, "password": PASSWORD}
    assert api.auth_configs == [("push", wanted), ("distribution", wanted)]


def test_without_env_docker_py_uses_the_docker_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HVD_REGISTRY_USERNAME", "HVD_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    api = recording_api()
    push_image(DockerEngine(api), IMAGE, REGISTRY)
    # None: docker-py's APIClient puts the Docker config's credentials in (see the HTTP test)
    assert api.auth_configs == [("push", None), ("distribution", None)]


@pytest.mark.parametrize(
    ("env", "given", "missing"),
    [
        ({"HVD_REGISTRY_USERNAME": USER}, "USERNAME", "PASSWORD"),
        ({"HVD_REGISTRY_PASSWORD": PASSWORD}, "PASSWORD", "USERNAME"),
    ],
)
def test_half_set_credentials_are_one_line(env: dict[str, str], given: str, missing: str) -> None:
    with pytest.raises(UserError) as info:
        auth_from_env(env)
    assert str(info.value) == (
        f"$HVD_REGISTRY_{given} is set but $HVD_REGISTRY_{missing} is not: set both, or "
        "neither to use the Docker config (~/.docker/config.json)"
    )
    assert_no_secret(str(info.value))


def test_half_set_credentials_stop_build_push_before_the_build(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HVD_REGISTRY_USERNAME", USER)
    monkeypatch.delenv("HVD_REGISTRY_PASSWORD", raising=False)

    def no_engine() -> None:
        raise AssertionError("the Docker engine was contacted")

    monkeypatch.setattr("hvd_container.containers.engine.docker_api.docker_client", no_engine)
    assert main(["build", "cpu-bookworm", "--push", REGISTRY]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("hvd-container: error: $HVD_REGISTRY_USERNAME is set but")


def echo(user: str = USER, password: str = PASSWORD) -> str:
    """A registry/engine message that echoes the request, credentials and all."""
    header, basic = secrets_of(user, password)[2:]
    return (
        f"denied: request POST /v2/ X-Registry-Auth={header} Authorization=Basic {basic} "
        f'body={{"username": "{user}", "password": "{password}"}}'
    )


def push_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], api: Any, *extra: str
) -> tuple[int, str]:
    monkeypatch.setattr("hvd_container.containers.engine.docker_api.docker_client", lambda: api)
    code = main(["push", IMAGE, "--registry", REGISTRY, *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("mode", [[], ["--json"]], ids=["plain", "json"])
def test_refused_push_echoing_the_request_shows_no_credentials(
    env_credentials: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mode: list[str],
) -> None:
    api = recording_api()
    api.push_stream = [{"status": "Preparing", "id": "abc"}, {"error": echo()}]
    code, output = push_cli(monkeypatch, capsys, api, *mode)
    assert code == 1
    assert f"push of {REMOTE} refused: denied: request POST /v2/ X-Registry-Auth=***" in output
    assert_no_secret(output)
    assert REMOTE not in api.images  # the refused push left no tag
    if mode:
        error = json.loads(output.splitlines()[-2])  # then the stderr line
        assert (error["event"], error["phase"], error["exit_code"]) == ("error", "push", 1)


def test_engine_exception_echoing_the_request_shows_no_credentials(
    env_credentials: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api = recording_api()

    def refuse(repo: str, tag: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        raise docker.errors.APIError("500", explanation=echo())

    api.push = refuse  # type: ignore[method-assign]
    code, output = push_cli(monkeypatch, capsys, api, "--json")
    assert code == 1 and "refused: denied:" in output
    assert_no_secret(output)


def test_read_back_echoing_the_request_shows_no_credentials(
    env_credentials: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api = recording_api()
    api.distribution = docker.errors.APIError("401", explanation=echo())
    code, output = push_cli(monkeypatch, capsys, api)
    assert code == 1 and f"pushed {REMOTE}, but cannot read it back: denied:" in output
    assert_no_secret(output)


def test_successful_push_output_has_no_credentials(
    env_credentials: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, output = push_cli(monkeypatch, capsys, recording_api(), "--json")
    assert code == 0
    assert json.loads(output.splitlines()[-1]) == {
        "event": "result",
        "remote": REMOTE,
        "digest": DIGEST,
    }
    assert_no_secret(output)


def test_redact_masks_every_form_and_leaves_other_text() -> None:
    auth = {"username": USER, "password": PASSWORD}
    masked = redact(echo(), auth)
    assert_no_secret(masked)
    assert masked.startswith("denied: request POST /v2/ X-Registry-Auth=*** Authorization=Basic")
    assert redact("manifest unknown", auth) == "manifest unknown"
    assert redact(echo(), None) == echo()  # no env credentials: nothing of ours to mask


class FakeEngineHTTP(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A FAKE Docker engine: the few HTTP API calls of a push, on a unix socket.

    Knows one image (IMAGE); records the X-Registry-Auth header of the push and of the
    read-back (decoded); `refuse` makes the push stream end in an error echoing the header.
    """

    daemon_threads = True

    def __init__(self, path: str) -> None:
        self.images = {IMAGE: {"Id": "sha256:1"}}
        self.auths: list[tuple[str, dict[str, Any] | None]] = []
        self.refuse = False
        super().__init__(path, _EngineHandler)


class _EngineHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # docker-py reads a push stream only when it is chunked
    server: FakeEngineHTTP

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        pass

    def _auth(self) -> dict[str, Any] | None:
        header = self.headers.get("X-Registry-Auth")
        return json.loads(base64.urlsafe_b64decode(header)) if header else None

    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _path(self) -> tuple[str, dict[str, list[str]]]:
        url = urlparse(self.path)
        path = unquote(url.path)
        if path.startswith("/v1."):
            path = path.split("/", 2)[2]
            path = "/" + path
        return path, parse_qs(url.query)

    def do_GET(self) -> None:
        path, _ = self._path()
        if path == "/version":
            self._send(200, {"ApiVersion": "1.41", "Version": "fake"})
        elif path.startswith("/images/") and path.endswith("/json"):
            ref = path[len("/images/") : -len("/json")]
            if ref in self.server.images:
                self._send(200, self.server.images[ref])
            else:
                self._send(404, {"message": f"No such image: {ref}"})
        elif path.startswith("/distribution/"):
            self.server.auths.append(("distribution", self._auth()))
            self._send(200, {"Descriptor": {"digest": DIGEST}})
        else:
            self._send(404, {"message": f"FAKE engine: no {path}"})

    def do_POST(self) -> None:
        path, query = self._path()
        if path.endswith("/tag"):
            image = path[len("/images/") : -len("/tag")]
            remote = f"{query['repo'][0]}:{query['tag'][0]}"
            self.server.images[remote] = self.server.images[image]
            self._send(201, {})
        elif path.endswith("/push"):
            auth = self._auth()
            self.server.auths.append(("push", auth))
            header = self.headers.get("X-Registry-Auth", "")
            chunks: list[dict[str, Any]] = [{"status": "Pushed", "id": "abc"}]
            if self.server.refuse:
                chunks.append({"error": f"denied: X-Registry-Auth={header} auth={auth}"})
            else:
                chunks.append({"aux": {"Tag": "1", "Digest": DIGEST}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in chunks:
                data = json.dumps(chunk).encode() + b"\r\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self._send(404, {"message": f"FAKE engine: no {path}"})

    def do_DELETE(self) -> None:
        path, _ = self._path()
        self.server.images.pop(path[len("/images/") :], None)
        self._send(200, [{"Untagged": path}])


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEngineHTTP]:
    server = FakeEngineHTTP(str(tmp_path / "docker.sock"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'docker.sock'}")
    for name in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "HVD_REGISTRY_USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("HVD_REGISTRY_PASSWORD", raising=False)
    # The Docker config as `docker login r.example:5000` writes it.
    config = tmp_path / "docker-config"
    config.mkdir()
    basic = base64.b64encode(b"cfg-user-3Z:cfg-Pa55-9x").decode()
    (config / "config.json").write_text(json.dumps({"auths": {REGISTRY: {"auth": basic}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    yield server
    server.shutdown()
    server.server_close()


def test_docker_config_credentials_reach_the_engine(
    engine: FakeEngineHTTP, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["push", IMAGE, "--registry", REGISTRY, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.splitlines()[-1])["digest"] == DIGEST
    for what, auth in engine.auths:
        assert auth is not None, what
        assert (auth["username"], auth["password"]) == ("cfg-user-3Z", "cfg-Pa55-9x")
    assert [what for what, _ in engine.auths] == ["push", "distribution"]


def test_env_credentials_win_over_the_docker_config(
    engine: FakeEngineHTTP, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HVD_REGISTRY_USERNAME", USER)
    monkeypatch.setenv("HVD_REGISTRY_PASSWORD", PASSWORD)
    engine.refuse = True  # and the refusal echoes the header it got
    assert main(["push", IMAGE, "--registry", REGISTRY, "--json"]) == 1
    captured = capsys.readouterr()
    assert engine.auths == [("push", {"username": USER, "password": PASSWORD})]
    assert f"push of {REMOTE} refused: denied: X-Registry-Auth=***" in captured.err
    assert_no_secret(captured.out + captured.err)
    assert REMOTE not in engine.images  # untagged again after the refusal


def test_step_failed_message_is_one_line(env_credentials: None) -> None:
    api = recording_api()
    api.push_stream = [{"error": echo()}]
    with pytest.raises(StepFailed) as info:
        push_image(DockerEngine(api), IMAGE, REGISTRY)
    assert "\n" not in str(info.value)
    assert_no_secret(str(info.value))
