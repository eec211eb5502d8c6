"""hvd-pip under /bin/sh against a local HTTP server: it points pip at the served pip.conf and CA
and removes its temporary directory whatever pip does."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hvd_container.containers.blocks import hvd_pip_script


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "hvd-pip"
    path.write_bytes(hvd_pip_script())
    return path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def run_hvd_pip(
    script: Path, tmp_path: Path, url: str | None, *args: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    bindir = Path(sys.executable).parent
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TMPDIR": str(scratch),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    if url is not None:
        env["HVD_PIP_CONFIG_URL"] = url
    done = subprocess.run(
        ["/bin/sh", str(script), *args], env=env, capture_output=True, text=True, timeout=120
    )
    return done, scratch


def test_uses_served_config_and_ca_then_cleans_up(
    script: Path, tmp_path: Path, served: tuple[str, Path]
) -> None:
    url, root = served
    (root / "pip.conf").write_text("[global]\nindex-url = http://mirror.invalid/simple\n")
    (root / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    done, scratch = run_hvd_pip(script, tmp_path, url + "/", "config", "list")
    assert done.returncode == 0, done.stderr
    assert "global.index-url='http://mirror.invalid/simple'" in done.stdout
    cert = [line for line in done.stdout.splitlines() if line.startswith(":env:.cert=")]
    assert len(cert) == 1
    cert_path = Path(cert[0].split("=", 1)[1].strip("'"))
    assert cert_path.name == "ca.pem" and cert_path.parent.parent == scratch
    assert not cert_path.parent.exists()
    assert list(scratch.iterdir()) == []


def test_ca_is_optional(script: Path, tmp_path: Path, served: tuple[str, Path]) -> None:
    url, root = served
    (root / "pip.conf").write_text("[global]\ntimeout = 7\n")
    done, scratch = run_hvd_pip(script, tmp_path, url, "config", "list")
    assert done.returncode == 0, done.stderr
    assert "global.timeout='7'" in done.stdout
    assert ":env:.cert" not in done.stdout
    assert list(scratch.iterdir()) == []


def test_missing_config_fails_and_cleans_up(
    script: Path, tmp_path: Path, served: tuple[str, Path]
) -> None:
    url, _ = served
    done, scratch = run_hvd_pip(script, tmp_path, url, "config", "list")
    assert done.returncode != 0
    assert f"hvd-pip: cannot fetch {url}/pip.conf: HTTP 404" in done.stderr
    assert list(scratch.iterdir()) == []


def test_pip_failure_is_reported_and_cleans_up(
    script: Path, tmp_path: Path, served: tuple[str, Path]
) -> None:
    url, root = served
    (root / "pip.conf").write_text("[global]\n")
    done, scratch = run_hvd_pip(script, tmp_path, url, "no-such-pip-command")
    assert done.returncode != 0
    assert "no-such-pip-command" in done.stderr
    assert list(scratch.iterdir()) == []


def test_without_url_runs_plain_pip(script: Path, tmp_path: Path) -> None:
    done, scratch = run_hvd_pip(script, tmp_path, None, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pip ")
    assert list(scratch.iterdir()) == []


def test_script_is_posix_sh() -> None:
    text = hvd_pip_script().decode()
    assert text.startswith("#!/bin/sh\n")
    assert "[[" not in text and "local " not in text
    if os.path.exists("/bin/dash"):
        check = subprocess.run(["/bin/dash", "-n"], input=text, text=True, capture_output=True)
        assert check.returncode == 0, check.stderr
