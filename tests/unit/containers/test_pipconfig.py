"""The host's pip configuration, rewritten and served to builds over HTTP."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from hvd_container.containers.pipconfig import (
    DEFAULT_PORT,
    NO_HOST_PIP_FLAG,
    HostPipConfig,
    configured_port,
    describe,
    parse_pip_config_list,
    read_host_pip_config,
    serve_host_pip_config,
    serve_plan,
)

from hvd_container.core.errors import UserError

PIP_CONFIG_LIST = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/other/ca.pem'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/ignored'
global.index-url='https://user:secret@pypi.example/simple'
"""


def test_env_wins_over_files() -> None:
    cfg = parse_pip_config_list(PIP_CONFIG_LIST)
    assert cfg.find_links == ["/opt/wheels"]
    assert cfg.cert == "/etc/ssl/certs/ca-certificates.crt"
    assert cfg.extra_index_urls == ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"]
    assert cfg.index_url == "https://user:secret@pypi.example/simple"
    assert cfg.other == {"default-timeout": "180"}


@pytest.fixture
def host_dirs(tmp_path: Path) -> HostPipConfig:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "demo-1.0-py3-none-any.whl").write_bytes(b"wheel")
    simple = tmp_path / "pypi" / "simple" / "demo"
    simple.mkdir(parents=True)
    (simple / "index.html").write_text('<a href="../../files/demo-1.0.tar.gz">demo</a>')
    (tmp_path / "pypi" / "files").mkdir()
    (tmp_path / "pypi" / "files" / "demo-1.0.tar.gz").write_bytes(b"sdist")
    (tmp_path / "secret.txt").write_text("no")
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    return HostPipConfig(
        index_url="https://pypi.org/simple",
        extra_index_urls=[f"file://{tmp_path}/pypi/simple"],
        find_links=[str(wheels), str(tmp_path / "missing")],
        cert=str(ca),
    )


def test_plan_rewrites_local_paths_and_trusts_the_server(host_dirs: HostPipConfig) -> None:
    plan = serve_plan(host_dirs, "http://10.0.0.1:1", "10.0.0.1")
    assert "index-url = https://pypi.org/simple" in plan.pip_conf
    assert "/fs" in plan.pip_conf and "file://" not in plan.pip_conf
    assert "missing" not in plan.pip_conf
    assert "trusted-host =\n    10.0.0.1" in plan.pip_conf
    assert "cert" not in plan.pip_conf  # the CA travels separately (ca.pem, via PIP_CERT)
    assert plan.ca_pem == b"-----BEGIN CERTIFICATE-----\n"


def test_server_serves_config_wheelhouse_and_index_but_nothing_else(
    host_dirs: HostPipConfig, tmp_path: Path
) -> None:
    with serve_host_pip_config("127.0.0.1", 0, host_dirs) as url:
        conf = urllib.request.urlopen(f"{url}/pip.conf").read().decode()
        assert url in conf
        assert urllib.request.urlopen(f"{url}/ca.pem").read().startswith(b"-----BEGIN")
        listing = urllib.request.urlopen(f"{url}/fs{tmp_path}/wheels/").read().decode()
        assert "demo-1.0-py3-none-any.whl" in listing
        page = f"{url}/fs{tmp_path}/pypi/simple/demo/"
        assert b"files/demo-1.0.tar.gz" in urllib.request.urlopen(page).read()
        # the index's relative link to ../../files/ resolves and is served
        assert urllib.request.urlopen(page + "../../files/demo-1.0.tar.gz").read() == b"sdist"
        for forbidden in (f"{url}/fs{tmp_path}/secret.txt", f"{url}/fs/etc/passwd"):
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(forbidden)
            assert info.value.code == 404
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/pip.conf", timeout=2)


def test_pips_proxy_is_read_but_kept_out_of_the_served_pip_conf() -> None:
    cfg = parse_pip_config_list("global.proxy='http://user:pw@proxy.example:3128'\n")
    assert cfg.proxy == "http://user:pw@proxy.example:3128"
    assert "proxy" not in serve_plan(cfg, "http://10.0.0.1:1", "10.0.0.1").pip_conf
    assert "pw" not in " ".join(describe(cfg))


def test_gateway_that_is_not_local_is_a_one_line_error_naming_the_flag() -> None:
    # 192.0.2.1 (TEST-NET-1) is nobody's address here
    with (
        pytest.raises(UserError) as info,
        serve_host_pip_config("192.0.2.1", 47310, HostPipConfig()),
    ):
        pass
    assert str(info.value) == (
        "cannot serve the host's pip configuration on 192.0.2.1:47310: 192.0.2.1 (the Docker "
        "bridge gateway) is not an address of this machine, so the Docker engine is probably "
        "remote; build with --no-host-pip to use the image's own pip setup"
    )


def test_the_suggested_flag_is_a_real_build_option() -> None:
    import typer.main

    from hvd_container.cli.app import app

    build = typer.main.get_command(app).get_command(None, "build")  # type: ignore[attr-defined]
    assert NO_HOST_PIP_FLAG in [opt for param in build.params for opt in param.opts]


def test_port_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert configured_port({}) == DEFAULT_PORT
    assert configured_port({"HVD_PIP_CONFIG_PORT": "0"}) == 0
    with pytest.raises(UserError, match=r"^\$HVD_PIP_CONFIG_PORT='x': expected a port number"):
        configured_port({"HVD_PIP_CONFIG_PORT": "x"})


def test_fallback_port_is_the_same_each_time() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        urls = []
        for _ in range(2):
            with serve_host_pip_config("127.0.0.1", port, HostPipConfig()) as url:
                urls.append(url)
    # the same URL each time (secret path included): the build arg, and so the cache, stays
    assert urls[0] == urls[1] and urls[0].startswith(f"http://127.0.0.1:{port + 1}/")


def test_pip_environment_variables_reach_the_served_config(monkeypatch: pytest.MonkeyPatch) -> None:
    # CI sets PIP_EXTRA_INDEX_URL for the CPU torch wheel: the real `pip config list` sees it.
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://download.pytorch.org/whl/cpu")
    monkeypatch.setenv("PIP_PROXY", "http://proxy.example:3128")
    cfg = read_host_pip_config()
    assert cfg.extra_index_urls == ["https://download.pytorch.org/whl/cpu"]
    assert cfg.proxy == "http://proxy.example:3128"
    conf = serve_plan(cfg, "http://10.0.0.1:1", "10.0.0.1").pip_conf
    assert "extra-index-url =\n    https://download.pytorch.org/whl/cpu" in conf


def _status(url: str) -> int:
    try:
        return int(urllib.request.urlopen(url, timeout=5).status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_only_what_the_build_needs_is_served(host_dirs: HostPipConfig, tmp_path: Path) -> None:
    (tmp_path / "pypi" / "files" / "other-2.0.tar.gz").write_bytes(b"in the index's tree")
    with serve_host_pip_config("127.0.0.1", 0, host_dirs) as url:
        root, _, secret = url.rpartition("/")
        # nothing without the secret path, not even pip.conf
        assert _status(f"{root}/pip.conf") == 404
        assert _status(f"{root}/fs{tmp_path}/wheels/") == 404
        # the index's tree (the folder holding simple/, where its ../../files/ are) is served
        assert _status(f"{url}/fs{tmp_path}/pypi/files/demo-1.0.tar.gz") == 200
        assert _status(f"{url}/fs{tmp_path}/pypi/files/other-2.0.tar.gz") == 200
        # and nothing outside the served roots
        assert _status(f"{url}/fs{tmp_path}/secret.txt") == 404
        assert _status(f"{url}/fs{tmp_path}/") == 404


def test_an_index_page_or_a_link_in_it_never_leads_outside_the_served_roots(
    host_dirs: HostPipConfig, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Someone who can write a shared index (and knows the secret) plants a page linking to a
    file of the building user, and a symbolic link to another: neither is served; a %00 in a
    path is a 400, not a traceback on the build's stderr."""
    evil = tmp_path / "pypi" / "simple" / "evil"
    evil.mkdir()
    (evil / "index.html").write_text(
        f'<a href="/fs{tmp_path}/secret.txt">x</a><a href="../../../secret.txt">y</a>'
    )
    (evil / "key.whl").symlink_to(tmp_path / "secret.txt")
    with serve_host_pip_config("127.0.0.1", 0, host_dirs) as url:
        assert _status(f"{url}/fs{tmp_path}/pypi/simple/evil/") == 200  # the page itself
        assert _status(f"{url}/fs{tmp_path}/secret.txt") == 404  # what it links to
        assert _status(f"{url}/fs{tmp_path}/pypi/simple/evil/../../../secret.txt") == 404
        assert _status(f"{url}/fs{tmp_path}/pypi/simple/evil/key.whl") == 404  # resolved first
        assert _status(f"{url}/fs{tmp_path}/pypi/files/demo-1.0.tar.gz%00.txt") == 400
        assert _status(f"{url}/fs{tmp_path}/pypi/%00") == 400
        assert _status(f"{url}/pip.conf") == 200  # and it still answers
    assert "Traceback" not in capfd.readouterr().err


def test_the_secret_is_kept_owner_only_and_reused(tmp_path: Path) -> None:
    from hvd_container.containers.pipconfig import SECRET_FILE, server_secret

    first = server_secret(tmp_path)
    path = tmp_path / "hvd-container" / SECRET_FILE
    assert path.stat().st_mode & 0o777 == 0o600 and len(first) == 32
    assert server_secret(tmp_path) == first
    path.chmod(0o644)  # readable by others: no longer a secret, made anew
    assert server_secret(tmp_path) != first


def test_a_multi_line_extra_index_url_keeps_every_index() -> None:
    # `pip config list` prints each value as Python's repr, so the lines come as \n escapes
    cfg = parse_pip_config_list(
        "global.extra-index-url='\\nhttp://a.example/simple\\nhttp://b.example/simple'\n"
    )
    assert cfg.extra_index_urls == ["http://a.example/simple", "http://b.example/simple"]
    conf = serve_plan(cfg, "http://10.0.0.1:1/s", "10.0.0.1").pip_conf
    assert "    http://a.example/simple\n    http://b.example/simple" in conf
