"""Image references as each site tool wants them. Pure string work, no imports: the launcher
uses these on its fast path (`run --dry-run`), so they must not pull in docker/requests/spython."""

from __future__ import annotations


def strip_docker_scheme(ref: str) -> str:
    """`docker://x` and `docker:x` -> `x`."""
    for prefix in ("docker://", "docker:"):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return ref


def is_registry_ref(target: str) -> bool:
    """Whether `target` names an image in a registry (HOST/REPOSITORY[:TAG|@DIGEST], the host
    with a dot, a port or `localhost`), not a file nor a short Docker Hub name."""
    first, sep, _rest = target.partition("/")
    return bool(sep) and ("." in first or ":" in first or first == "localhost")


def shifter_image_ref(image: str) -> str:
    """`docker:repo/name:tag` as shifterimg wants it: no docker.io/ prefix, explicit tag."""
    image = strip_docker_scheme(image)
    for prefix in (
        "docker.io/library/",
        "index.docker.io/library/",
        "docker.io/",
        "index.docker.io/",
    ):
        if image.startswith(prefix):
            image = image[len(prefix) :]
            break
    last = image.rpartition("/")[2]
    if ":" not in last and "@" not in last:
        image += ":latest"
    return f"docker:{image}"


def enroot_image_ref(ref: str) -> str:
    """A registry reference as enroot reads it, `[REGISTRY#]IMAGE[:TAG]` (Pyxis, CSCS's
    Container Engine): a registry the reference names is separated from the image with '#'."""
    ref = strip_docker_scheme(ref)
    first, sep, rest = ref.partition("/")
    if sep and "#" not in ref and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return ref
