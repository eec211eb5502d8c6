"""`--to shifter|podman-hpc`: push the image to the site's registry, then have the site's
tool fetch it (Shifter's image gateway, podman-hpc's squashed store)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from hvd_container.core.errors import StepFailed, UserError

TOOL = {"shifter": "shifterimg", "podman-hpc": "podman-hpc"}


def remote_name(image: str, registry: str) -> str:
    """registry/name:tag for a local image name:tag (its own registry part, if any, dropped)."""
    name = image
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        name = image.split("/", 1)[1]
    last = name.rpartition("/")[2]
    if ":" not in last:
        name += ":latest"
    return f"{registry.rstrip('/')}/{name}"


def _line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def push_image(image: str, remote: str, client: Any = None) -> None:
    """Tag and push; docker-py reports push errors only inside the stream, so check every chunk.

    An unreachable engine is a UserError, any other engine/API failure a StepFailed: one line."""
    import docker
    import requests

    try:
        client = client or docker.from_env()
    except docker.errors.DockerException as exc:
        raise UserError(
            f"cannot reach the Docker engine ({_line(exc)}); is dockerd running?"
        ) from None
    repository, _, tag = remote.rpartition(":")
    try:
        local = client.images.get(image)
        local.tag(repository, tag)
        for chunk in client.api.push(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise StepFailed(f"docker push {remote} failed: {chunk['error']}")
    except docker.errors.ImageNotFound:
        raise UserError(f"image {image!r} not found in the local Docker engine") from None
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise StepFailed(f"docker push {remote} failed: {_line(exc)}") from None


def _site(name: str | None) -> Any:
    from hvd_container.launcher.sites import select_site

    return select_site(name)


def publish_to_site(
    image: str,
    *,
    runtime: str,
    site_name: str | None = None,
    registry: str | None = None,
    login_host: str | None = None,
    on_step: Callable[[str], None] | None = None,
    push: Callable[[str, str], None] = push_image,
) -> str:
    """Push image and make it available to the site's runtime; returns the runtime's reference."""
    if runtime not in TOOL:
        raise UserError(f"--to {runtime}: not a site image runtime (allowed: {', '.join(TOOL)})")
    step = on_step or (lambda _m: None)
    local_tool = shutil.which(TOOL[runtime]) is not None
    need_site = site_name is not None or registry is None or (login_host is None and not local_tool)
    site = _site(site_name) if need_site else None
    registry = registry or (site.images.registry if site else None)
    if not registry:
        where = f"site {site.name!r} has no images.registry" if site else "no site"
        raise UserError(f"--registry: needed for --to {runtime} ({where})")
    if login_host is None and not local_tool:
        login_host = site.login_host if site else None
        if not login_host:
            raise UserError(
                f"{TOOL[runtime]} is not on PATH and site {site.name if site else '?'!r} has no "
                f"login_host: run on the login node or give --login-host"
            )
    remote = remote_name(image, registry)
    step(f"pushing {image} to {remote}")
    push(image, remote)
    if runtime == "shifter":
        from hvd_container.containers.convert.shifter import pull_and_lookup, shifter_image_ref

        image_id = pull_and_lookup(
            remote, login_host=login_host, on_status=lambda s: step(f"gateway: {s}")
        )
        ref = shifter_image_ref(remote)
        step(f"shifterimg lookup: {image_id}")
        return ref
    from hvd_container.containers.convert.podman_hpc import pull_and_migrate

    return pull_and_migrate(remote, login_host=login_host, on_step=step)
