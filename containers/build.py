"""Recipe -> verified, labelled Docker image (and optionally pushed).

Steps: render the build context; reuse the tagged image when its build digest matches (cache
hit); otherwise serve the host's pip configuration, take Horovod's wheel from a registry where one
is named (containers/wheel_cache.py), build through the engine interface with live progress,
verify the result (containers/verify.py), write the bill of materials (containers/bom.py) and
record the facts as labels in a second build (one small layer: the document), and tag. A failed
build or verification leaves no new tag and no containers.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from hvd_container.containers import bom, pipconfig, wheel_cache
from hvd_container.containers.base_pin import needs_pin, pin_of
from hvd_container.containers.blocks.base import debootstrap_script_args
from hvd_container.containers.engine import EngineError, open_engine
from hvd_container.containers.pipconfig import PORT_ENV, configured_port, serve_host_pip_config
from hvd_container.containers.render import DockerBuild, build_digest, docker_build
from hvd_container.containers.verify import (
    docker_runner,
    fact_labels,
    require_ok,
    verify_image,
)

from hvd_container import facts
from hvd_container.core.errors import StepFailed, UserError, source_checkout_hint

if TYPE_CHECKING:
    from hvd_container.containers.engine import Engine
    from hvd_container.containers.recipe import LockedRecipe, Recipe
    from hvd_container.containers.wheel_cache import Wheel

BUILD_DIGEST_LABEL = facts.BUILD_DIGEST
VERIFIED_LABEL = facts.VERIFIED
BOM_LABEL = facts.BOM
PIP_URL_ARG = "HVD_PIP_CONFIG_URL"
DEBOOTSTRAP_PREFIX = "debootstrap:"


def engine_build_digest(engine: Engine, build: DockerBuild) -> str:
    """build_digest of the build's context with the ID its base image has in the engine now."""
    return build_digest(build.context, _base_id(engine, build))


def _base_id(engine: Engine, build: DockerBuild) -> str | None:
    found = _image_labels(engine, build.base)
    return found[0] if found else None


@dataclass
class BuildResult:
    tag: str
    image_id: str
    cached: bool
    seconds: float
    labels: dict[str, str] = field(default_factory=dict)
    pushed: str | None = None
    wheel: Wheel | None = None  # Horovod's wheel image, where a wheel cache was named


Reporter = Callable[[str, str, str], None]
"""report(kind, phase, text): kind is one of step, log, cached, info, done."""


class BuildOptions:
    def __init__(
        self,
        no_cache: bool = False,
        verify: bool = True,
        use_host_pip: bool = True,
        pip_config_port: int | None = None,
        wheel_cache: str | None = None,
    ) -> None:
        self.no_cache = no_cache
        self.verify = verify
        self.use_host_pip = use_host_pip
        self.pip_config_port = pip_config_port
        self.wheel_cache = wheel_cache  # a registry for Horovod's wheel (containers/wheel_cache)


def _image_labels(engine: Engine, ref: str) -> tuple[str, dict[str, str]] | None:
    info = engine.inspect(ref)
    if info is None:
        return None
    return info["Id"], dict((info.get("Config") or {}).get("Labels") or {})


def ensure_base_image(engine: Engine, recipe: Recipe, base: str, report: Reporter) -> None:
    """Make sure FROM's image exists locally; `debootstrap:<suite>` bases are built once if
    missing."""
    if _image_labels(engine, base) is not None:
        return
    spec = recipe.base.image
    if not spec.startswith(DEBOOTSTRAP_PREFIX):
        return  # let the engine try to pull it and report what goes wrong
    suite = spec[len(DEBOOTSTRAP_PREFIX) :]
    args = debootstrap_script_args(suite, recipe.arch)
    script = _base_image_script()
    if script is None:
        raise UserError(
            f"recipe {recipe.name}: base image {base} is missing: it is made with debootstrap "
            f"from a Debian mirror ({source_checkout_hint('base-image.sh ' + ' '.join(args))}; "
            f"point ${BASE_SCRIPT_ENV} at that script to let build make it)"
        )
    report("info", "base", f"making {base} with debootstrap (once; cached as a local image)")
    try:
        proc = subprocess.run([str(script), *args], capture_output=True, text=True)
    except OSError as exc:
        raise UserError(f"cannot run {script}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise StepFailed(f"making base image {base} failed: {last}")
    if _image_labels(engine, base) is None:  # the script imports into the Docker engine
        raise UserError(
            f"recipe {recipe.name}: {script.name} made base image {base} in the Docker engine, "
            f"which is not the engine of this build: copy it over (`docker save {base} | "
            "podman load`) and build again"
        )


def unpinned_base(recipe: LockedRecipe) -> str | None:
    """A note when FROM names a registry tag without a digest (a tag can move under it)."""

    pin = pin_of(recipe)
    if not needs_pin(recipe) or (pin and pin.digest):
        return None
    why = f" ({pin.reason})" if pin and pin.reason else ""
    return (
        f"base {recipe.base.image} is not pinned by digest{why}: `hvd-container lock` where its "
        "registry answers writes the digest into the lock"
    )


def missing_base(base: str, exc: StepFailed) -> StepFailed:
    """The engine could not pull FROM: one line on how to get it (the failure's step, output
    and instruction kept for --json)."""
    reason = getattr(exc, "message", None) or str(exc)
    error = StepFailed(
        f"base image {base} cannot be pulled ({reason}): if its registry no longer has it "
        "(NVIDIA deletes the tags of end-of-life CUDA releases), set base.image to a newer tag; "
        f"else mirror it where this engine pulls from (`docker pull {base}` on a machine that "
        "reaches it, then `docker save` | `docker load` here, or push it to your registry and "
        "set base.image to that copy)"
    )
    for name in ("step", "total", "instruction", "tail"):
        setattr(error, name, getattr(exc, name, None))
    return error


BASE_SCRIPT_ENV = "HVD_BASE_IMAGE_SCRIPT"


def _base_image_script() -> Path | None:
    env = os.environ.get(BASE_SCRIPT_ENV)
    if env:
        if not Path(env).is_file():
            raise UserError(f"${BASE_SCRIPT_ENV}={env}: no such file (unset it to use the default)")
        return Path(env)
    candidate = Path(__file__).resolve().parent.parent / "testbed" / "base-image.sh"
    return candidate if candidate.is_file() else None


def build_recipe(
    recipe: LockedRecipe,
    report: Reporter,
    options: BuildOptions | None = None,
    engine: Engine | None = None,
) -> BuildResult:
    """Build, verify and label the image of recipe; reuse it when nothing changed."""

    opts = options or BuildOptions()
    start = time.monotonic()
    engine = engine or open_engine(nocache=opts.no_cache)
    build = docker_build(recipe)  # the blocks, rendered once
    tag = recipe.image_tag

    # The base first: its ID is part of the digest. A base that is still missing here (the
    # engine pulls it during the build) gives a digest no earlier build labelled: a rebuild.
    # Whether the host's pip configuration is served (--no-host-pip) is not part of it: the
    # recipe pins what is installed, the pip configuration only says where it comes from.
    ensure_base_image(engine, recipe, build.base, report)
    unpinned = unpinned_base(recipe)
    if unpinned:
        report("info", "base", unpinned)
    digest = engine_build_digest(engine, build)
    existing = _image_labels(engine, tag)
    if (
        not opts.no_cache
        and existing is not None
        and existing[1].get(BUILD_DIGEST_LABEL) == digest
        and existing[1].get(VERIFIED_LABEL) == "true"
        and BOM_LABEL in existing[1]  # built before images held one: made again (layers cached)
    ):
        report("cached", "done", f"{tag} is up to date (build digest {digest[:12]}), not rebuilt")
        _make_runnable(engine, tag, report)
        return BuildResult(tag, existing[0], True, time.monotonic() - start, existing[1])

    try:
        image_id, wheel = _run_engine(engine, recipe, build, report, opts)
    except StepFailed as exc:
        if str(getattr(exc, "instruction", "") or "").upper().startswith("FROM "):
            raise missing_base(build.base, exc) from None
        raise
    try:
        # Again: a base the engine pulled during the build has an ID only now.
        labels = {BUILD_DIGEST_LABEL: engine_build_digest(engine, build)}
        versions: dict[str, str] = {}
        if opts.verify:
            arch = _image_arch(engine, image_id)
            result = verify_image(
                image_id,
                docker_runner(engine, image_id),
                arch,
                recipe,
                on_step=lambda msg: report("step", "checks", f"verify: {msg}"),
            )
            result.image = tag
            require_ok(result)
            labels.update(fact_labels(result, recipe))
            versions = result.versions
        report("step", "checks", "bill of materials: the image's Debian packages, the lock")
        materials = _bill_of_materials(engine, image_id, recipe, build, versions)
        labels[BOM_LABEL] = facts.bom_digest(materials)
        final_id = apply_labels(engine, image_id, tag, labels, {bom.BOM_FILE: materials})
    finally:
        _remove_untagged(engine, image_id)
    _make_runnable(engine, tag, report)
    if wheel is not None:
        wheel = wheel_cache.share(engine, wheel, lambda text: report("info", "horovod", text))
    seconds = time.monotonic() - start
    report("done", "done", f"built {tag} ({final_id[7:19]}) in {seconds:.0f} s")
    return BuildResult(tag, final_id, False, seconds, labels, wheel=wheel)


def _make_runnable(engine: Engine, tag: str, report: Reporter) -> None:
    """Where the engine's runtime reads images from elsewhere (podman-hpc's squashed store)."""
    done = engine.make_runnable(tag)
    if done:
        report("info", "done", done)


def _run_engine(
    engine: Engine,
    recipe: LockedRecipe,
    build: DockerBuild,
    report: Reporter,
    opts: BuildOptions,
) -> tuple[str, Wheel | None]:
    """The untagged image (the tag only moves once verification has passed), and the image of
    Horovod's wheel where a wheel cache is named (found, pulled or built first)."""

    def drive(source: DockerBuild, tag: str, buildargs: dict[str, str]) -> str:
        phases = source.phases
        for ev in engine.build(source.context, tag, buildargs):
            if ev.kind == "done":
                assert ev.image_id
                return ev.image_id
            step = None if ev.step is None else source.step_of(ev.stage, ev.step)
            total = len(phases) if ev.stage is not None and phases else ev.total
            text = f"[{step}/{total}] {ev.text}" if ev.kind == "step" else ev.text
            phase = "base" if step is None or not phases else phases[min(step, len(phases)) - 1]
            report(ev.kind, phase, text)
        raise StepFailed(f"build of {tag or recipe.image_tag} ended without an image")

    with _build_args(engine, report, opts) as buildargs:
        wheel = None
        if opts.wheel_cache is not None:
            wheel = wheel_cache.provide(
                engine,
                recipe,
                opts.wheel_cache,
                _base_id(engine, build),
                lambda source, tag: drive(source, tag, buildargs),
                lambda text: report("info", "horovod", text),
                fresh=opts.no_cache,
            )
        source = docker_build(recipe, wheel.image) if wheel is not None else build
        return drive(source, "", buildargs), wheel


@contextlib.contextmanager
def _build_args(engine: Engine, report: Reporter, opts: BuildOptions) -> Iterator[dict[str, str]]:
    """The build's args: the host's proxies, and the URL of its pip configuration, served for
    as long as the builds run (--no-host-pip: none)."""
    if not opts.use_host_pip:
        yield _with_proxies({}, proxy_build_args(os.environ), report)
        return
    gateway = engine.bridge_gateway()
    host_pip = pipconfig.read_host_pip_config()
    wanted = opts.pip_config_port if opts.pip_config_port is not None else configured_port()
    with serve_host_pip_config(gateway, wanted, host_pip) as url:
        served = urlparse(url).port
        if wanted and served != wanted:
            report(
                "info",
                "frameworks",
                f"port {wanted} is taken: the pip config is served on port {served}, so pip "
                f"layers cached with another port are rebuilt (set ${PORT_ENV} to keep it fixed)",
            )
        proxies = proxy_build_args(os.environ, pip_proxy=host_pip.proxy, bypass=[gateway])
        yield _with_proxies({PIP_URL_ARG: url}, proxies, report)


# Docker's predefined proxy ARGs: a RUN sees them without an ARG line, and the classic builder
# keeps them out of `docker history` and out of the layer cache key, so passing them neither
# leaks credentials into the image nor turns a changed proxy into a rebuild.
PROXY_ARGS = ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY")
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def proxy_build_args(
    environ: Mapping[str, str], pip_proxy: str | None = None, bypass: Sequence[str] = ()
) -> dict[str, str]:
    """Build args carrying the host's proxy settings into the build.

    The host's HTTP(S)_PROXY/FTP_PROXY/NO_PROXY (either case) pass as they are. pip's own
    `proxy` setting fills http(s)_proxy where the environment names none (pip gives its
    `proxy` to every request, the config server's included, while the variables honour
    no_proxy). With any proxy set, the bypass hosts (the pip config server) join NO_PROXY.
    """
    args: dict[str, str] = {}
    for name in PROXY_ARGS:
        for key in (name, name.lower()):
            if environ.get(key):
                args[key] = environ[key]
    if pip_proxy:
        for key in ("http_proxy", "https_proxy"):
            if not (args.get(key) or args.get(key.upper())):
                args[key] = pip_proxy
    if bypass and any(k.lower() != "no_proxy" for k in args):
        hosts = [h.strip() for k in ("NO_PROXY", "no_proxy") for h in args.get(k, "").split(",")]
        merged = ",".join(dict.fromkeys(h for h in [*hosts, *bypass] if h))
        args["NO_PROXY"] = args["no_proxy"] = merged
    return args


def _with_proxies(
    buildargs: dict[str, str], proxies: Mapping[str, str], report: Reporter
) -> dict[str, str]:
    loopback = []
    for key, value in proxies.items():
        url = value if "://" in value else f"http://{value}"  # `host:port` is common too
        if key.lower() != "no_proxy" and urlparse(url).hostname in _LOOPBACK:
            loopback.append(key)
    if loopback:
        report(
            "info",
            "base",
            f"{'/'.join(loopback)} name a loopback address, which build containers cannot reach "
            "(use an address of this host they can reach, e.g. the Docker bridge gateway)",
        )
    return {**buildargs, **proxies}


def _image_arch(engine: Engine, image: str) -> str:
    return str((engine.inspect(image) or {}).get("Architecture") or "unknown")


def _bill_of_materials(
    engine: Engine,
    image_id: str,
    recipe: LockedRecipe,
    build: DockerBuild,
    versions: Mapping[str, str],
) -> bytes:
    """The image's bill of materials, its Debian packages read from its own dpkg database (an
    image without one lists none)."""
    run = docker_runner(engine, image_id)
    status_rc, status = run(["cat", "/var/lib/dpkg/status"])
    release_rc, release = run(["cat", "/etc/os-release"])
    debs = bom.installed_debs(status) if status_rc == 0 else []
    os_info = bom.os_release(release) if release_rc == 0 else {}
    text = bom.bill_of_materials(
        recipe, build.base, _base_id(engine, build), debs, os_info, versions
    )
    return text.encode()


def apply_labels(
    engine: Engine,
    image_id: str,
    tag: str,
    labels: Mapping[str, str],
    files: Mapping[str, bytes] | None = None,
) -> str:
    """Tag image_id with labels added: a metadata-only build (`FROM id` + labels), and files
    (path in the image -> content) copied in: one small layer."""
    copies = {
        f"file{number}": (path, data) for number, (path, data) in enumerate((files or {}).items())
    }
    lines = [f"FROM {image_id}", *(f"COPY {name} {path}" for name, (path, _) in copies.items())]
    context = {"Dockerfile": ("\n".join(lines) + "\n").encode()}
    context.update({name: data for name, (_, data) in copies.items()})
    for ev in engine.build(context, tag, labels=labels):
        if ev.kind == "done" and ev.image_id:
            return ev.image_id
    raise StepFailed(f"labelling {tag} failed")


def _remove_untagged(engine: Engine, image_id: str) -> None:
    """Drop the intermediate (unlabelled) image if nothing refers to it by tag."""

    try:
        info = engine.inspect(image_id)
        if info is not None and not info.get("RepoTags"):
            engine.remove(image_id)
    except EngineError:
        pass  # a child image (the labelled one) keeps it alive; that is fine
