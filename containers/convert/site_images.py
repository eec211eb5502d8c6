"""`--to` a site runtime (containers/convert/publisher.py: Shifter, podman-hpc): push the
image to the site's registry, then have the site's tool fetch it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass

from hvd_container.containers import push as push_module
from hvd_container.containers.convert.publisher import publishers
from hvd_container.containers.engine import engine_errors
from hvd_container.containers.push import remote_ref

from hvd_container.core.errors import UserError


@dataclass(frozen=True)
class SiteTarget:
    """What publishing needs of a site profile; the caller reads the profile (the build side
    does not depend on the launch side)."""

    name: str
    registry: str | None
    login_host: str | None


def _remote(image: str, registry: str) -> str:
    repository, tag = remote_ref(image, registry)
    return f"{repository}:{tag}"


def publish_to_site(
    image: str,
    *,
    runtime: str,
    site_name: str | None = None,
    registry: str | None = None,
    login_host: str | None = None,
    on_step: Callable[[str], None] | None = None,
    site_lookup: Callable[[str | None], SiteTarget] | None = None,
    push: Callable[[str, str], object] | None = None,
) -> str:
    """Push image and make it available to the site's runtime; returns the runtime's reference.

    site_lookup(site_name) reads the site profile, asked only when the flags leave something
    open; push(image, registry) defaults to containers.push.push_image (credentials from the
    environment or the Docker config, masked messages, no tag left behind on failure)."""
    known = publishers()
    if runtime not in known:
        raise UserError(f"--to {runtime}: not a site image runtime (allowed: {', '.join(known)})")
    publisher = known[runtime]
    step = on_step or (lambda _m: None)
    local_tool = shutil.which(publisher.tool) is not None
    need_site = site_name is not None or registry is None or (login_host is None and not local_tool)
    site = site_lookup(site_name) if need_site and site_lookup is not None else None
    registry = registry or (site.registry if site else None)
    if not registry:
        where = f"site {site.name!r} has no images.registry" if site else "no site"
        raise UserError(f"--registry: needed for --to {runtime} ({where})")
    if login_host is None and not local_tool:
        login_host = site.login_host if site else None
        if not login_host:
            raise UserError(
                f"{publisher.tool} is not on PATH and site {site.name if site else '?'!r} has no "
                f"login_host: run on the login node or give --login-host"
            )
    remote = _remote(image, registry)
    step(f"pushing {image} to {remote}")
    if push is None:
        _push_with_engine(image, registry, step)
    else:
        push(image, registry)
    return publisher.fetch(remote, login_host, step)


def _push_with_engine(image: str, registry: str, step: Callable[[str], None]) -> None:

    with engine_errors():
        push_module.push_image(None, image, registry, step)
