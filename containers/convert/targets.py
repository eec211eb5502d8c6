"""`convert`: from a recipe or a Docker image to what a site runs, one target each.

`convert` picks the converter for the target and the engine, after refusing the flags that
target would ignore; what it made comes back as plain data (the CLI prints it, or its `--json`
record). Publishing to a site (Shifter, podman-hpc) needs the site's registry and login host:
the caller hands in how to read a site profile (the build side does not read them itself).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from hvd_container.containers.convert.definition import debootstrap_note, write_definition
from hvd_container.containers.convert.options import check_flags, check_recipe_arch
from hvd_container.containers.convert.publisher import publishers
from hvd_container.containers.convert.sif_apptainer import convert_with_apptainer
from hvd_container.containers.convert.sif_native import convert_image_to_sif
from hvd_container.containers.convert.site_images import SiteTarget, publish_to_site
from hvd_container.containers.convert.source import Source, default_output, resolve_sources
from hvd_container.containers.transfer import OnTransfer

from hvd_container.core.errors import UserError

# a SIF file, the site runtimes' own stores (containers/convert/publisher.py), a definition
TARGETS: tuple[str, ...] = ("sif", *publishers(), "def")


@dataclass(frozen=True)
class ConvertRequest:
    """What to convert, into what, and the flags of `convert` (None: not given)."""

    source: str  # a recipe (file or built-in name) or a Docker image
    to: str  # one of TARGETS
    output: Path | None = None
    engine: Literal["native", "apptainer"] | None = None
    compression: str | None = None
    threads: int | None = None
    arch: str | None = None
    archive: Path | None = None
    bootstrap: Literal["debootstrap", "docker"] | None = None
    site: str | None = None
    registry: str | None = None
    login_host: str | None = None


def convert(
    request: ConvertRequest,
    *,
    on_step: Callable[[str], None],
    on_transfer: OnTransfer | None = None,
    push: Callable[[str, str], object] | None = None,
    site_lookup: Callable[[str | None], SiteTarget] | None = None,
) -> dict[str, Any]:
    """Do the conversion; the facts of what it made (`path`, `image`, `reference`, sizes...)."""
    engine = request.engine or "native"
    # Flags that the target/engine would ignore are refused before anything else.
    check_flags(
        request.to,
        engine,
        {
            "--output": request.output,
            "--engine": request.engine,
            "--compression": request.compression,
            "--threads": request.threads,
            "--arch": request.arch,
            "--archive": request.archive,
            "--bootstrap": request.bootstrap,
            "--site": request.site,
            "--registry": request.registry,
            "--login-host": request.login_host,
        },
    )
    sources = resolve_sources(request.source, request.arch)
    if len(sources) == 1:
        return _convert_one(request, sources[0], engine, on_step, on_transfer, push, site_lookup)
    names = ", ".join(source.image for source in sources)
    if request.to != "sif":
        raise UserError(
            f"{request.source} makes an image for each of several architectures ({names}): "
            f"convert --to {request.to} one of them (--arch, or its tag)"
        )
    folder = request.output or Path(".")
    if folder.exists() and not folder.is_dir():
        raise UserError(
            f"--output {folder}: a folder for the SIF files of {names} (one an architecture), "
            "not a file"
        )
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for source in sources:
        one = replace(request, output=folder / default_output(source.image, ".sif"))
        made.append(_convert_one(one, source, engine, on_step, on_transfer, push, site_lookup))
    return {"images": made}


def _convert_one(
    request: ConvertRequest,
    src: Source,
    engine: str,
    on_step: Callable[[str], None],
    on_transfer: OnTransfer | None,
    push: Callable[[str, str], object] | None,
    site_lookup: Callable[[str | None], SiteTarget] | None,
) -> dict[str, Any]:
    check_recipe_arch(request.arch, src.recipe)
    if request.to == "def":
        path = write_definition(src.recipe, request.output, bootstrap=request.bootstrap)
        note = debootstrap_note(src.recipe, request.bootstrap)
        return {"path": str(path), **({"note": note} if note else {})}
    if request.to == "sif":
        target = request.output or default_output(src.image, ".sif")
        if engine == "apptainer":
            # Apptainer's converter only here: it needs the Docker engine's client (the build extra)

            convert_with_apptainer(src.image, target, archive=request.archive, on_step=on_step)
            return {"path": str(target), "image": src.image, "engine": "apptainer"}

        result = convert_image_to_sif(
            src.image,
            target,
            compression=request.compression or "gzip",
            threads=request.threads,
            arch=request.arch,
            on_step=on_step,
            on_transfer=on_transfer,
        )
        return {
            "path": str(result.path),
            "image": result.image,
            "engine": "native",
            "size": result.size,
            "arch": result.arch,
            "compression": result.compression,
            "rootfs_offset": result.rootfs_offset,
            "seconds": round(result.seconds, 1),
            **({"kept": True} if result.kept else {}),
        }
    ref = publish_to_site(
        src.image,
        runtime=request.to,
        site_name=request.site,
        registry=request.registry,
        login_host=request.login_host,
        on_step=on_step,
        site_lookup=site_lookup,
        push=push,
    )
    return {"image": src.image, "reference": ref}
