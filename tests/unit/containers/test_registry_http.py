"""Each request to a registry is bounded: a registry out of reach is one line at once, one that
never answers times out, a gateway's passing 503 is asked again. Real sockets on 127.0.0.1
(a listener that accepts and never answers, a small HTTP server), no registry stand-in."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from hvd_container.containers import registry_http
from hvd_container.containers.image_index import INDEX, Registry

from hvd_container.core.errors import StepFailed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_registry_out_of_reach_is_one_line_within_seconds() -> None:
    registry = Registry(f"127.0.0.1:{free_port()}/u/i", None)  # nothing listens there
    start = time.monotonic()
    with pytest.raises(StepFailed) as failed:
        registry.manifest("t", [INDEX])
    assert time.monotonic() - start < 5  # oras-py's own retries waited 131 s
    assert str(failed.value).startswith("registry 127.0.0.1:")
    assert "Connection refused" in str(failed.value) and "\n" not in str(failed.value)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose listener accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield int(server.getsockname()[1])


def test_a_registry_that_never_answers_times_out(
    silent_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_http, "READ_TIMEOUT_S", 1)
    registry = Registry(f"127.0.0.1:{silent_port}/u/i", None)
    start = time.monotonic()
    with pytest.raises(StepFailed, match=r"^registry 127\.0\.0\.1:\d+/u/i: .*[Tt]imed? ?out"):
        registry.blob("sha256:" + "0" * 64)
    assert time.monotonic() - start < 5  # one read timeout, not sent again


class Flaky(http.server.BaseHTTPRequestHandler):
    """503 to the first request, the manifest to every other."""

    answered = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        type(self).answered += 1
        if type(self).answered == 1:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b'{"schemaVersion": 2}'
        self.send_response(200)
        self.send_header("Content-Type", INDEX)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


def test_a_passing_503_is_asked_again() -> None:
    Flaky.answered = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        registry = Registry(f"127.0.0.1:{server.server_address[1]}/u/i", None)
        assert registry.manifest("t", [INDEX]) == (INDEX, b'{"schemaVersion": 2}')
        assert Flaky.answered == 2
    finally:
        server.shutdown()
        server.server_close()
