"""The host's pip configuration, served to a Docker build for the duration of the build.

Builds run `hvd-pip` (containers/blocks/hvd-pip.sh), which fetches `$HVD_PIP_CONFIG_URL/pip.conf`
and `$HVD_PIP_CONFIG_URL/ca.pem` for each pip command and deletes them afterwards, so the CA bundle
and any index credentials never land in an image layer. This module reads the host's pip settings
(`pip config list`, which already merges files and PIP_* variables), rewrites local wheelhouses
(find-links) and `file://` indexes to URLs on this server, and serves them from a short-lived
HTTP server bound to the Docker bridge gateway, which build containers can reach.
"""

from __future__ import annotations

import contextlib
import errno
import http.server
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from hvd_container.core.errors import UserError

# A fixed port keeps the build arg (and so the layer cache) the same from build to build:
# the classic builder treats a changed build-arg value as a cache miss for every later RUN.
DEFAULT_PORT = 47310
PORT_ENV = "HVD_PIP_CONFIG_PORT"
# When the port is taken, the next few are tried in order (not a random one), so a port that
# stays taken by another service still gives the same URL, and so cache hits, build after build.
FALLBACK_PORTS = 9

# Keys copied from the host configuration as they are (anything else pip knows is left out).
_PASSTHROUGH = ("index-url", "timeout", "default-timeout", "retries", "trusted-host", "no-index")
_LIST_KEYS = ("extra-index-url", "find-links", "trusted-host")


@dataclass
class HostPipConfig:
    """The settings of the host's pip that matter to a build, merged (env wins)."""

    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    cert: str | None = None
    # pip's `proxy`: not written into the served pip.conf, because pip sends every request to
    # it (no_proxy ignored), also those for the config server; the build gets it as the
    # http(s)_proxy variables instead (containers.build.proxy_build_args).
    proxy: str | None = None
    other: dict[str, str] = field(default_factory=dict)


def parse_pip_config_list(text: str) -> HostPipConfig:
    """Parse `pip config list` output (`section.key='value'` lines) into a HostPipConfig.

    Precedence follows pip: `:env:` (PIP_* variables) over `install.` over `global.`.
    """
    rank = {"global": 0, "install": 1, ":env:": 2}
    chosen: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        key, sep, raw = line.partition("=")
        if not sep or "." not in key:
            continue
        section, _, name = key.rpartition(".")
        if section not in rank:
            continue
        value = raw.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        prior = chosen.get(name)
        if prior is None or rank[section] >= prior[0]:
            chosen[name] = (rank[section], value)
    values = {k: v for k, (_, v) in chosen.items()}
    config = HostPipConfig(
        index_url=values.pop("index-url", None),
        extra_index_urls=values.pop("extra-index-url", "").split(),
        find_links=values.pop("find-links", "").split(),
        cert=values.pop("cert", None),
        proxy=values.pop("proxy", None) or None,
    )
    config.other = {k: v for k, v in values.items() if k in _PASSTHROUGH}
    return config


def read_host_pip_config(python: str = sys.executable) -> HostPipConfig:
    """The host's effective pip configuration (files + PIP_* environment)."""
    try:
        out = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return HostPipConfig(cert=os.environ.get("PIP_CERT"))
    return parse_pip_config_list(out)


def _local_dir(location: str) -> Path | None:
    """The directory a find-links entry or index URL names, if it is local."""
    if location.startswith("file://"):
        return Path(unquote(urlparse(location).path))
    if "://" in location:
        return None
    return Path(location)


@dataclass
class ServedConfig:
    """What the server serves: pip.conf text, the CA bundle, and local directories by prefix."""

    pip_conf: str
    ca_pem: bytes | None
    directories: dict[str, Path]  # served roots (absolute), keyed by their path


def serve_plan(config: HostPipConfig, base_url: str, host: str) -> ServedConfig:
    """Rewrite local paths in config to URLs under base_url; pure apart from reading the CA."""
    directories: dict[str, Path] = {}

    def rewrite(location: str, kind: str) -> str | None:
        local = _local_dir(location)
        if local is None:
            return location
        if not local.is_dir():
            return None  # pip would skip a missing path too; leave it out
        local = local.resolve()
        # Simple indexes often link to ../../files/<wheel>: allow the index's parent as well.
        allowed = local.parent if kind == "index" else local
        directories[str(allowed)] = allowed
        return f"{base_url}/fs{local}/"

    lines = ["[global]"]
    index_url = rewrite(config.index_url, "index") if config.index_url else None
    if index_url:
        lines.append(f"index-url = {index_url}")
    extra = [u for u in (rewrite(x, "index") for x in config.extra_index_urls) if u]
    if extra:
        lines.append("extra-index-url =\n" + "".join(f"    {u}\n" for u in extra).rstrip("\n"))
    links = [u for u in (rewrite(x, "links") for x in config.find_links) if u]
    if links:
        lines.append("find-links =\n" + "".join(f"    {u}\n" for u in links).rstrip("\n"))
    trusted = config.other.get("trusted-host", "").split()
    if directories:
        trusted.append(host)  # plain http to the gateway: pip ignores untrusted http hosts
    if trusted:
        lines.append("trusted-host =\n" + "".join(f"    {h}\n" for h in trusted).rstrip("\n"))
    for key, value in sorted(config.other.items()):
        if key not in _LIST_KEYS:
            lines.append(f"{key} = {value}")
    ca = None
    if config.cert and Path(config.cert).is_file():
        ca = Path(config.cert).read_bytes()
    return ServedConfig("\n".join(lines) + "\n", ca, directories)


class _Handler(http.server.SimpleHTTPRequestHandler):
    served: ServedConfig

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        pass  # build output is the user's log; requests are noise

    def _memory(self) -> bytes | None:
        path = self.path.split("?", 1)[0]
        if path == "/pip.conf":
            return self.served.pip_conf.encode()
        if path == "/ca.pem":
            return self.served.ca_pem
        return None

    def translate_path(self, path: str) -> str:
        raw = unquote(path.split("?", 1)[0])
        if not raw.startswith("/fs/"):
            return "/nonexistent"
        target = Path(raw[len("/fs") :]).resolve()
        for root in self.served.directories.values():
            if target == root or root in target.parents:
                return str(target) + ("/" if raw.endswith("/") else "")
        return "/nonexistent"  # only the configured wheelhouses and indexes are served

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/pip.conf", "/ca.pem"):
            data = self._memory()
            if data is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        super().do_GET()


NO_HOST_PIP_FLAG = "--no-host-pip"


def _bind(
    host: str, port: int, handler: type[http.server.BaseHTTPRequestHandler]
) -> http.server.ThreadingHTTPServer:
    """Bind host:port, or the next free one of the FALLBACK_PORTS after it (port 0: any)."""
    candidates = [port] if port == 0 else range(port, min(port + FALLBACK_PORTS + 1, 65536))
    last: OSError | None = None
    for candidate in candidates:
        try:
            return http.server.ThreadingHTTPServer((host, candidate), handler)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise UserError(_bind_problem(host, candidate, exc)) from None
            last = exc
    assert last is not None
    raise UserError(_bind_problem(host, port, last)) from None


def _bind_problem(host: str, port: int, exc: OSError) -> str:
    what = f"cannot serve the host's pip configuration on {host}:{port}"
    if exc.errno == errno.EADDRNOTAVAIL:
        reason = (
            f"{host} (the Docker bridge gateway) is not an address of this machine, "
            "so the Docker engine is probably remote"
        )
    elif exc.errno == errno.EADDRINUSE:
        reason = f"ports {port}-{port + FALLBACK_PORTS} are all in use (set ${PORT_ENV})"
    else:
        reason = exc.strerror or type(exc).__name__
    return f"{what}: {reason}; build with {NO_HOST_PIP_FLAG} to use the image's own pip setup"


def configured_port(environ: Mapping[str, str] = os.environ) -> int:
    """The port asked for: $HVD_PIP_CONFIG_PORT, else DEFAULT_PORT."""
    raw = environ.get(PORT_ENV, "").strip()
    if not raw:
        return DEFAULT_PORT
    if not raw.isdigit() or int(raw) > 65535:
        raise UserError(f"${PORT_ENV}={raw!r}: expected a port number (0-65535, 0: any free)")
    return int(raw)


@contextlib.contextmanager
def serve_host_pip_config(
    host: str, port: int | None = None, config: HostPipConfig | None = None
) -> Iterator[str]:
    """Serve the host's pip configuration on host:port while the block runs; yield its URL."""
    config = config or read_host_pip_config()
    port = port if port is not None else configured_port()
    # A subclass per server: the plan (it holds the URL, known once bound) is a class attribute,
    # as the HTTP server creates a handler per request, and two servers must not share one.
    handler: type[_Handler] = type("PipConfigHandler", (_Handler,), {})
    server = _bind(host, port, handler)
    actual = server.server_address[1]
    url = f"http://{host}:{actual}"
    handler.served = serve_plan(config, url, host)
    thread = threading.Thread(target=server.serve_forever, name="hvd-pip-config", daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def describe(config: HostPipConfig) -> Sequence[str]:
    """Human summary for --verbose output (no credentials: URLs shown without userinfo)."""

    def clean(u: str) -> str:
        p = urlparse(u)
        return u if not p.password else shlex.quote(u.replace(p.password, "***"))

    out = []
    if config.proxy:
        out.append(f"proxy {clean(config.proxy)}")
    if config.index_url:
        out.append(f"index-url {clean(config.index_url)}")
    out += [f"extra-index-url {clean(u)}" for u in config.extra_index_urls]
    out += [f"find-links {clean(u)}" for u in config.find_links]
    if config.cert:
        out.append(f"cert {config.cert}")
    return out
