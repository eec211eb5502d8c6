"""The host's pip configuration, served to a Docker build for the duration of the build.

Builds run `hvd-pip` (containers/blocks/hvd-pip.sh), which fetches `$HVD_PIP_CONFIG_URL/pip.conf`
and `$HVD_PIP_CONFIG_URL/ca.pem` for each pip command and deletes them afterwards, so the CA bundle
and any index credentials never land in an image layer. This module reads the host's pip settings
(`pip config list`, which already merges files and PIP_* variables), rewrites local wheelhouses
(find-links) and `file://` indexes to URLs on this server, and serves them from a short-lived
HTTP server bound to the Docker bridge gateway, which build containers can reach.

Anyone on the host who reaches that address while a build runs could ask it too, so it serves
only what the build needs: pip.conf, the CA, and files below the served roots: each wheelhouse
directory, and each index's tree (the index directory, or the folder holding it when it is
named `simple`, as PEP 503 indexes keep their files in ../../files/ beside it). Nothing outside
them, whatever an index page links to or a symbolic link in them points at (paths are
resolved first); a path with a NUL byte is a 400. Every URL sits under a secret path: 128
random bits kept owner-only in the
user's config directory. It is the same from build to build on purpose: the URL is a build arg,
and a changed build arg makes the classic builder rebuild every later layer (torch, Horovod).
The URL shows in `docker history` of the built image, so the secret keeps out other users of the
host, not those who hold the image; delete the file to rotate it (the pip layers rebuild once).
A per-build secret would need BuildKit's secret mounts, which docker-py cannot drive.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import http.server
import os
import secrets
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import UserError
from hvd_container.core.text import ascii_digits

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
        value = _unrepr(raw.strip())
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


def _unrepr(raw: str) -> str:
    """A value as `pip config list` prints it: Python's repr of the string (a multi-line
    extra-index-url comes as 'a\\nb', one line with escapes)."""

    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return raw[1:-1]
        if isinstance(value, str):
            return value
    return raw


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

    def rewrite(location: str, index: bool) -> str | None:
        local = _local_dir(location)
        if local is None:
            return location
        if not local.is_dir():
            return None  # pip would skip a missing path too; leave it out
        local = local.resolve()
        root = local.parent if index and local.name == "simple" else local
        directories[str(root)] = root
        return f"{base_url}/fs{local}/"

    lines = ["[global]"]
    index_url = rewrite(config.index_url, index=True) if config.index_url else None
    if index_url:
        lines.append(f"index-url = {index_url}")
    extra = [u for u in (rewrite(x, index=True) for x in config.extra_index_urls) if u]
    if extra:
        lines.append("extra-index-url =\n" + "".join(f"    {u}\n" for u in extra).rstrip("\n"))
    links = [u for u in (rewrite(x, index=False) for x in config.find_links) if u]
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
    prefix: str  # "/<secret>": nothing is served outside it

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        pass  # build output is the user's log; requests are noise

    def _local(self, path: str) -> str | None:
        """The request path below the secret prefix, or None."""
        raw = unquote(path.split("?", 1)[0].split("#", 1)[0])
        if not raw.startswith(self.prefix + "/"):
            return None
        return raw[len(self.prefix) :]

    def _memory(self, local: str) -> bytes | None:
        if local == "/pip.conf":
            return self.served.pip_conf.encode()
        if local == "/ca.pem":
            return self.served.ca_pem
        return None

    def translate_path(self, path: str) -> str:
        """A file or directory below one of the served roots (links on an index page are
        followed only there too: a page someone could write never leads elsewhere)."""
        local = self._local(path)
        if local is None or not local.startswith("/fs/") or "\x00" in local:
            return "/nonexistent"
        target = Path(local[len("/fs") :]).resolve()
        for root in self.served.directories.values():
            if target == root or root in target.parents:
                return str(target) + ("/" if local.endswith("/") else "")
        return "/nonexistent"  # only the configured wheelhouses and indexes are served

    def _refused(self) -> bool:
        """A request no file can answer: outside the secret prefix (404), or naming a path
        with a NUL byte (400, which no file system has)."""
        local = self._local(self.path)
        if local is None:
            self.send_error(404)
            return True
        if "\x00" in local:
            self.send_error(400, "a NUL byte in the path")
            return True
        return False

    def do_GET(self) -> None:
        if self._refused():
            return
        local = self._local(self.path)
        if local in ("/pip.conf", "/ca.pem"):
            data = self._memory(local)
            if data is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        super().do_GET()

    def do_HEAD(self) -> None:
        if self._refused():
            return
        super().do_HEAD()


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
    if not ascii_digits(raw) or int(raw) > 65535:
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
    secret = server_secret()
    handler: type[_Handler] = type("PipConfigHandler", (_Handler,), {"prefix": f"/{secret}"})
    server = _bind(host, port, handler)
    actual = server.server_address[1]
    url = f"http://{host}:{actual}/{secret}"
    handler.served = serve_plan(config, url, host)
    thread = threading.Thread(target=server.serve_forever, name="hvd-pip-config", daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


SECRET_FILE = "pip-server-secret"


def server_secret(config_dir: Path | None = None) -> str:
    """The secret path of the pip config server: made once, kept owner-only (module docstring
    says why it is not made anew for each build)."""

    base = config_dir or Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    path = base / "hvd-container" / SECRET_FILE
    try:
        text = path.read_text().strip()
        if len(text) >= 22 and text.isalnum() and (path.stat().st_mode & 0o077) == 0:
            return text
    except OSError:
        pass
    secret = secrets.token_hex(16)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, secret + "\n", mode=0o600)
    except OSError as exc:
        raise UserError(
            f"cannot keep the pip server's secret in {path}: {exc.strerror or exc}"
        ) from None
    return secret


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
