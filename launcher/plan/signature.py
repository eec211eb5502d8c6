"""The image's signature as a launch checks it: against which keys, with what outcome, and
the digest of the file as checked (the batch script's pin: what runs is what was checked).

Resolved once, in the plan's resolve step: the `signature` check (launcher/checks/registry.py)
judges this record and the batch script writes its digest; neither asks again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from hvd_container.containers.sif.format import has_sif_magic
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.runtimes import Runtime
from hvd_container.launcher.sites.model import Site

from hvd_container.core.errors import UserError
from hvd_container.core.image_refs import is_registry_ref, strip_docker_scheme

_CHUNK = 1 << 20


@dataclass(frozen=True)
class ImageSignature:
    """What the launch knows of its image's signature."""

    required: bool  # the site's images.signatures.required
    keys: tuple[str, ...]  # the site's trusted key files, then --keyring's
    path: str | None = None  # the SIF that was checked (a registry image: its reference)
    signers: tuple[str, ...] = ()  # the fingerprints whose signatures held, every group
    problems: tuple[str, ...] = ()  # why the signatures do not hold
    unjudged: str | None = None  # why nothing could be checked
    absent: bool = False  # the image file is not on this machine (the image check says so)
    digest: str | None = None  # the file's sha256 (a registry image's digest) when it held
    registry: bool = False  # a pushed image, checked beside the digest its tag names

    @property
    def holds(self) -> bool:
        return self.unjudged is None and not self.problems and bool(self.signers)


def sha256_of(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            hasher.update(chunk)
    return hasher.hexdigest()


def resolve_signature(
    site: Site, request: LaunchRequest, image: str | None, runtime: Runtime
) -> ImageSignature | None:
    """The signature check of this launch's image; None when nobody asked for one (no key is
    trusted and none is required)."""
    wanted = site.images.signatures
    keys = (*wanted.keys, *request.keyrings)
    if not keys and not wanted.required:
        return None
    path = runtime.image_path(image) if image else None
    if image is None:
        why = "no image: the launch runs on the host"
        return ImageSignature(required=wanted.required, keys=keys, unjudged=why)
    if path is None:
        return _registry_signature(wanted.required, keys, strip_docker_scheme(image))
    file = Path(path)
    if not file.exists():
        why = f"{path}: not on this machine, its signature is checked where it is"
        return ImageSignature(required=wanted.required, keys=keys, unjudged=why, absent=True)
    if not file.is_file() or not has_sif_magic(file):
        why = f"{path}: not a SIF file here (SIF files carry signatures: `hvd-container sign`)"
        return ImageSignature(required=wanted.required, keys=keys, unjudged=why)
    if not keys:
        why = "no trusted keys named: the site profile's images.signatures.keys, or --keyring FILE"
        return ImageSignature(required=True, keys=(), path=path, problems=(why,))
    # the signing side only when a signature is asked for: about 10 ms of every dry run
    from hvd_container.containers.signing import check_sif

    try:
        groups = check_sif(file, [Path(k) for k in keys])
    except UserError as exc:  # a key file that holds no key, a SIF that cannot be read
        return ImageSignature(required=wanted.required, keys=keys, path=path, problems=(str(exc),))
    problems: tuple[str, ...] = tuple(f"group {g.group}: {p}" for g in groups for p in g.problems)
    signers = tuple(dict.fromkeys(s for g in groups for s in g.signers))
    return ImageSignature(
        required=wanted.required,
        keys=keys,
        path=path,
        signers=signers,
        problems=problems,
        digest=None if problems else sha256_of(file),
    )


def _registry_signature(required: bool, keys: tuple[str, ...], ref: str) -> ImageSignature:
    """A pushed image's signatures (cosign's format) beside the digest its tag names now."""
    if not is_registry_ref(ref):
        why = (
            f"{ref}: a short Docker Hub name, whose signature is not checked: name its registry "
            "(docker.io/NAME:TAG) or run a signed SIF"
        )
        return ImageSignature(required=required, keys=keys, unjudged=why)
    if not keys:
        why = "no trusted keys named: the site profile's images.signatures.keys, or --keyring FILE"
        return ImageSignature(required=True, keys=(), path=ref, problems=(why,))
    # the signing side only when a signature is asked for: about 10 ms of every dry run
    from hvd_container.containers.signing import check_image

    try:
        found = check_image(ref, [Path(k) for k in keys])
    except UserError as exc:  # no PEM key among them, the registry out of reach, no extra
        return ImageSignature(required=required, keys=keys, path=ref, unjudged=str(exc))
    return ImageSignature(
        required=required,
        keys=keys,
        path=ref,
        signers=tuple(found.signers),
        problems=tuple(found.problems),
        digest=found.digest if found.ok else None,
        registry=True,
    )


def pinned_image(
    image: str | None, signature: ImageSignature | None, runtime: Runtime
) -> str | None:
    """The image the job runs: a registry image whose signature held, by the digest that was
    checked, where the runtime runs a digest reference; else the image as named."""
    if image is None or signature is None or not signature.registry or not signature.holds:
        return image
    ref = strip_docker_scheme(image)
    if "@" in ref or not runtime.runs_digests:
        return image
    head, _, last = ref.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}@{signature.digest}"
