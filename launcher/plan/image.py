"""The image a launch runs, and what is known about it.

The image is --image, else the site's images.template filled from --recipe's name and version.
Its facts (hvd_container/facts.py) are read from the image itself: a SIF's labels (and its
descriptor's arch, for SIFs made elsewhere), an image directory's labels.json, or, when the
launch may wait for the engine, a local Docker image's labels. They win over the recipe's.
"""

from __future__ import annotations

import json

from hvd_container.containers.sif.format import has_sif_magic
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.runtimes import Runtime, is_file_ref
from hvd_container.launcher.sites.model import Site

from hvd_container.core.errors import UserError
from hvd_container.core.files import read_limited_text, user_path
from hvd_container.facts import ImageFacts, facts_from_labels, facts_from_recipe, merged


def resolve_image(site: Site, request: LaunchRequest, runtime: Runtime) -> tuple[str | None, str]:
    """(the image the launch runs, where its name came from); None for a runtime that runs
    none and was given none."""
    if request.image:
        return request.image, "--image"
    origin = f"image of recipe {request.recipe} (site {site.name}'s images.template)"
    facts = request.facts
    if facts is None or facts.name is None:
        if not runtime.runs_image:
            return None, origin
        raise UserError(
            f"site {site.name} runs containers with {runtime.kind}: pass --image IMAGE or --recipe RECIPE"
        )
    template = site.images.template or "{name}:{version}"
    try:
        ref = template.format(
            name=facts.name,
            version=facts.version or "latest",
            registry=site.images.registry or "",
            dir=site.images.dir or ".",
        )
    except (KeyError, IndexError, AttributeError, ValueError) as exc:
        # profiles are checked when loaded; this guards sites built in code
        detail = f"unknown placeholder {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UserError(
            f"{site.source}: images.template: {detail} (allowed: name, version, registry, dir)"
        ) from None
    if site.images.registry and "{registry}" not in template and not ref.startswith("/"):
        ref = f"{site.images.registry.rstrip('/')}/{ref}"
    return ref, origin


def builtin_recipe_facts(name: str) -> ImageFacts | None:
    """The facts of the built-in recipe `name` (the shipped file, never one of that name in the
    working directory), or None."""
    # the recipe model only for images whose labels lack a fact: about 40 ms to import
    from hvd_container.containers.recipe_loader import (
        builtin_path,
        list_builtin,
        read_recipe,
    )

    if name not in list_builtin():
        return None
    try:
        return facts_from_recipe(read_recipe(builtin_path(name)))
    except UserError:
        return None


def _docker_labels(ref: str) -> dict[str, str] | None:
    """The labels of a local Docker image, or None (no SDK, no engine, no such image)."""
    # the engine only for a launch that asks it (never a dry run): about 1 ms to import
    from hvd_container.containers.engine import open_engine

    try:
        info = open_engine(timeout=5).inspect(ref)
    except Exception:  # no SDK, no engine: no facts, no checks
        return None
    if info is None:
        return None
    return dict((info.get("Config") or {}).get("Labels") or {})


MAX_LABELS_BYTES = 1 << 20  # an image directory's labels.json: a few KiB in practice


def read_facts(image: str, *, ask_docker: bool) -> ImageFacts | None:
    """The build facts of a SIF file, an image directory or (`ask_docker`) a local Docker
    image; None when it records none. Files are read now; the engine is asked only when the
    launch may wait for it (not in a dry run, which must stay fast and work anywhere)."""
    path = user_path(image)
    source = f"image {image}"
    if path.is_dir():
        labels_file = path / ".singularity.d" / "labels.json"
        if not labels_file.is_file():
            return None
        text = read_limited_text(labels_file, "a JSON file", MAX_LABELS_BYTES, "an image's labels")
        try:
            labels = json.loads(text)
        except (ValueError, RecursionError):  # not JSON: no facts recorded
            return None
        if not isinstance(labels, dict):
            return None
        return facts_from_labels(labels, source, recipe_lookup=builtin_recipe_facts)
    if path.is_file():
        try:
            sif = has_sif_magic(path)
        except OSError as exc:
            raise UserError(f"image {image}: cannot read it ({exc.strerror})") from None
        if not sif:
            return None
        # the SIF reader only for a SIF: about 2 ms to import
        from hvd_container.containers.sif.reader import read_sif

        info = read_sif(path)
        arch = info.arch if info.arch != "unknown" else None
        found = facts_from_labels(info.labels, source, arch, builtin_recipe_facts)
        if found is None and arch is not None:
            # a SIF made elsewhere, without our labels: its descriptor still tells the arch
            return ImageFacts(source=source, arch=arch)
        return found
    if is_file_ref(image) or not ask_docker:
        return None
    labels = _docker_labels(image)
    return facts_from_labels(labels, source, recipe_lookup=builtin_recipe_facts) if labels else None


def launch_facts(
    request: LaunchRequest, image: str | None, runtime: Runtime, *, ask_docker: bool
) -> ImageFacts | None:
    """What the launch knows of its image: the image's own facts, then the recipe's."""
    if not runtime.runs_image:
        return None  # the program runs on the host: no image's facts apply
    found = None
    if image and runtime.missing_image(image, "") is None:
        found = read_facts(image, ask_docker=ask_docker)
    if found is None:
        return request.facts
    return merged(found, request.facts)
