"""The image's bill of materials: CycloneDX 1.6 JSON, written with cyclonedx-python-lib.

What it lists, each from where it is known best: the base image (its name, and its digest from
the lock's pin, else its ID in the engine), every Debian package the image's own dpkg database
says is installed (read from the built image), every pip package of the lock with its hashes,
Horovod compiled from its sdist (the sdist's hash, and as its pedigree the patches applied, each
with its digest, and the build flags), NCCL, CUDA and MPI as verification found them, and the
recipe (name, version, digest) as the image it describes. The build writes it into the image
at BOM_FILE and its digest into the label facts.BOM (containers/build.py).

A pure function over plain data: the same inputs give the same bytes (the serial number is
derived from them, and there is no time stamp: the image records when it was made).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hvd_container.containers import lockfile
from hvd_container.containers.base_pin import pin_of
from hvd_container.containers.blocks import horovod, horovod_patches

from hvd_container import facts

try:  # the build extra: a launch-only install builds nothing, so writes no bill of materials
    from cyclonedx.model import AttachedText, HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import (
        Component,
        ComponentType,
        Diff,
        Patch,
        PatchClassification,
        Pedigree,
    )
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL
except ModuleNotFoundError:
    Bom = None  # type: ignore[assignment,misc]

from hvd_container.core.errors import missing_build_extra

if TYPE_CHECKING:
    from hvd_container.containers.recipe import LockedRecipe

BOM_FILE = facts.BOM_FILE
PROPERTY = "hvd-container:"  # the namespace of this tool's properties (CycloneDX's taxonomy)
# the facts verification records that the document lists as components of the image
VERIFIED_PARTS = ("nccl", "cuda", "mpi")
_NAMESPACE = uuid.UUID("6f1d3c52-7a0e-4c89-9b1e-8f2f0c6a1d40")  # this tool's serial numbers


@dataclass(frozen=True)
class DebPackage:
    name: str
    version: str
    arch: str


def installed_debs(dpkg_status: str) -> list[DebPackage]:
    """The packages /var/lib/dpkg/status marks `install ok installed`, by name."""
    found: list[DebPackage] = []
    for stanza in dpkg_status.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            key, sep, value = line.partition(":")
            if sep and line[:1] not in (" ", "\t"):
                fields[key.strip()] = value.strip()
        if fields.get("Status") == "install ok installed" and fields.get("Package"):
            found.append(
                DebPackage(
                    fields["Package"], fields.get("Version", ""), fields.get("Architecture", "")
                )
            )
    return sorted(found, key=lambda p: (p.name, p.arch))


def os_release(text: str) -> dict[str, str]:
    """/etc/os-release's KEY=value lines (quotes removed)."""
    pairs = (line.partition("=") for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip().strip('"') for key, _, value in pairs}


def bill_of_materials(
    recipe: LockedRecipe,
    base: str,
    base_id: str | None,
    debs: Iterable[DebPackage],
    os_info: Mapping[str, str],
    versions: Mapping[str, str],
) -> str:
    """The CycloneDX JSON of the image built from recipe (see the module's docstring): base is
    the image FROM names, base_id its ID in the engine."""
    if Bom is None:
        raise missing_build_extra("cyclonedx-python-lib, which writes the bill of materials,")
    image = Component(
        type=ComponentType.CONTAINER,
        name=recipe.name,
        version=str(recipe.version),
        bom_ref=f"image:{recipe.image_tag}",
        properties=[
            Property(name=PROPERTY + "recipe.digest", value=recipe.digest()),
            Property(name=PROPERTY + "arch", value=recipe.arch),
        ],
    )
    parts = [_base(recipe, base, base_id)]
    parts += [_deb(p, os_info) for p in debs]
    parts += _pip(recipe)
    parts += [_verified(name, versions[name]) for name in VERIFIED_PARTS if versions.get(name)]
    seed = "\0".join([recipe.digest(), base_id or "", *sorted(str(p.bom_ref) for p in parts)])
    bom = Bom(serial_number=uuid.uuid5(_NAMESPACE, seed))
    # no time stamp: the same inputs give the same bytes, and the image's layer with them
    bom.metadata.timestamp = None  # type: ignore[assignment]
    bom.metadata.component = image
    for part in parts:
        bom.components.add(part)
    bom.register_dependency(image, parts)
    return JsonV1Dot6(bom).output_as_string(indent=1)


def _base(recipe: LockedRecipe, name: str, base_id: str | None) -> Component:
    pin = pin_of(recipe)
    digest = pin.digest if pin is not None and pin.digest else None
    props = [Property(name=PROPERTY + "image.id", value=base_id)] if base_id else []
    return Component(
        type=ComponentType.CONTAINER,
        name=name,
        version=digest or base_id or "unknown",
        bom_ref=f"base:{name}",
        properties=props,
    )


def _deb(package: DebPackage, os_info: Mapping[str, str]) -> Component:
    vendor = os_info.get("ID", "debian")
    qualifiers = {"arch": package.arch}
    if os_info.get("VERSION_ID"):
        qualifiers["distro"] = f"{vendor}-{os_info['VERSION_ID']}"
    purl = PackageURL("deb", vendor, package.name, package.version, qualifiers)
    return Component(
        type=ComponentType.LIBRARY,
        name=package.name,
        version=package.version,
        purl=purl,
        bom_ref=purl.to_string(),
    )


def _pip(recipe: LockedRecipe) -> list[Component]:
    """The lock's packages with their hashes; Horovod with its pedigree."""
    if recipe.lock is None:
        return []
    found = []
    for name, entry in sorted(lockfile.entries(recipe.lock).items()):
        package = lockfile.parse_lock(entry)[name]
        purl = PackageURL("pypi", None, name, package.version)
        hashes = [
            HashType(alg=HashAlgorithm.SHA_256, content=word.split(":", 1)[1])
            for word in entry.split()
            if word.startswith("--hash=sha256:")
        ]
        component = Component(
            type=ComponentType.LIBRARY,
            name=name,
            version=package.version,
            purl=purl,
            bom_ref=purl.to_string(),
            hashes=hashes,
        )
        if name == "horovod" and recipe.horovod is not None:
            component = _compiled(recipe, component)
        found.append(component)
    return found


def _compiled(recipe: LockedRecipe, sdist: Component) -> Component:
    """Horovod as built here: from the sdist (its hashes), with the patches applied (each by
    name, its commands and their digest) and the build flags."""
    patches = [
        Patch(
            type=PatchClassification.BACKPORT,
            diff=Diff(text=AttachedText(content="\n".join(horovod_patches.PATCHES[name]))),
        )
        for name in horovod.patches(recipe)
    ]
    props = [
        Property(name=PROPERTY + "built-from", value="sdist"),
        *(
            Property(name=f"{PROPERTY}patch.{name}", value=_digest(horovod_patches.PATCHES[name]))
            for name in horovod.patches(recipe)
        ),
        *(
            Property(name=f"{PROPERTY}build.{k}", value=v)
            for k, v in sorted(horovod.build_env(recipe).items())
        ),
    ]
    return Component(
        type=sdist.type,
        name=sdist.name,
        version=sdist.version,
        purl=sdist.purl,
        bom_ref=str(sdist.bom_ref),
        hashes=sdist.hashes,
        pedigree=Pedigree(patches=patches) if patches else None,
        properties=props,
    )


def _verified(name: str, version: str) -> Component:
    return Component(
        type=ComponentType.LIBRARY,
        name=name,
        version=version,
        bom_ref=f"verified:{name}",
        properties=[Property(name=PROPERTY + "source", value="verify")],
    )


def _digest(commands: list[str]) -> str:
    return "sha256:" + hashlib.sha256("\n".join(commands).encode()).hexdigest()
