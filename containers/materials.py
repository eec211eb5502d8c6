"""A bill of materials read back (containers/bom.py writes it): from a SIF's SBOM object or from
an image in the engine, checked against the digest its label records; its parts as rows, and
what changed between two of them (`inspect --sbom`, `inspect --diff`).

Plain JSON reading: the launch side and `inspect` need no CycloneDX library for this.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hvd_container.containers.sif.reader import read_sif

from hvd_container import facts
from hvd_container.core.errors import StepFailed, UserError

if TYPE_CHECKING:
    from hvd_container.containers.engine import Engine


@dataclass(frozen=True, order=True)
class Part:
    """One component: its kind (deb, pypi, container, or the tool's own: verified), name,
    version."""

    kind: str
    name: str
    version: str


@dataclass(frozen=True)
class Materials:
    """A bill of materials as read: where from, the document, its parts."""

    source: str
    document: dict[str, Any]
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class Change:
    kind: str
    name: str
    before: str | None  # None: added
    after: str | None  # None: removed


def checked(document: bytes | None, recorded: str | None, source: str) -> bytes:
    """The document, refused where it does not match the digest its label records (the image
    or file was changed after its build) or where there is none."""
    if document is None:
        missing = "its label names one" if recorded else "it was built without one"
        raise UserError(f"{source} has no bill of materials ({missing})")
    if recorded is None:
        raise UserError(
            f"{source}: a bill of materials without the label {facts.BOM} that records its "
            "digest: nothing says it belongs to this image"
        )
    found = facts.bom_digest(document)
    if found != recorded:
        raise StepFailed(
            f"{source}: the bill of materials does not match its label ({found}, label "
            f"{recorded}): changed after the build"
        )
    return document


def from_sif(path: Path) -> Materials:
    info = read_sif(path)
    return parse(checked(info.bom, info.labels.get(facts.BOM), str(path)), str(path))


def from_image(engine: Engine, ref: str) -> Materials:
    info = engine.inspect(ref)
    if info is None:
        raise UserError(f"{ref}: no such file, and no such image in the engine")
    labels = (info.get("Config") or {}).get("Labels") or {}
    document = engine.read_file(str(info["Id"]), facts.BOM_FILE)
    return parse(checked(document, labels.get(facts.BOM), f"image {ref}"), f"image {ref}")


def read(
    target: str, engine: Callable[[], Engine], remote: Callable[[str], Materials]
) -> Materials:
    """A SIF file's bill of materials, the one beside an image in its registry (remote: a
    reference that names a registry host, REGISTRY/NAME:TAG or @DIGEST), or a local image's
    (engine: opened only then)."""
    path = Path(target)
    if path.is_file():
        return from_sif(path)
    first = target.split("/", 1)[0]
    if "/" in target and ("." in first or ":" in first or first == "localhost"):
        return remote(target)
    return from_image(engine(), target)


def parse(document: bytes, source: str) -> Materials:
    try:
        data = json.loads(document)
        components = data["components"]
        parts = tuple(sorted(_part(c) for c in components))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{source}: the bill of materials is not CycloneDX JSON ({exc})") from None
    return Materials(source, data, parts)


def _part(component: Mapping[str, Any]) -> Part:
    purl = str(component.get("purl") or "")
    kind = purl[4 : purl.index("/")] if purl.startswith("pkg:") and "/" in purl else ""
    if not kind:
        kind = "container" if component.get("type") == "container" else "verified"
    return Part(kind, str(component["name"]), str(component.get("version") or ""))


def diff(before: Materials, after: Materials) -> list[Change]:
    """Parts added, removed or at another version, by kind and name."""
    old = {(p.kind, p.name): p.version for p in before.parts}
    new = {(p.kind, p.name): p.version for p in after.parts}
    changes = [
        Change(kind, name, old.get((kind, name)), new.get((kind, name)))
        for kind, name in sorted(old.keys() | new.keys())
        if old.get((kind, name)) != new.get((kind, name))
    ]
    return changes
