"""Docker image -> SIF without Apptainer: the engine's export of the image streams into the SIF
writer (containers/sif/writer.py), which needs no unpacked copy and no tar on disk."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hvd_container.containers.convert.compression import check_compressor
from hvd_container.containers.convert.options import check_arch_flag
from hvd_container.containers.convert.output import SIF_MODE, check_output_path, creation_mode
from hvd_container.containers.engine import EngineError, open_engine
from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.metadata import ImageConfig
from hvd_container.containers.sif.reader import SifInfo, read_sif, rootfs_compressor
from hvd_container.containers.sif.writer import write_sif
from hvd_container.containers.transfer import OnTransfer

from hvd_container import facts
from hvd_container.core.errors import StepFailed, UserError
from hvd_container.core.text import ascii_digits

if TYPE_CHECKING:
    from hvd_container.containers.engine import Engine


@dataclass(frozen=True)
class SifResult:
    """What a native conversion produced."""

    path: Path
    image: str
    image_id: str
    arch: str
    compression: str
    size: int
    rootfs_offset: int
    rootfs_size: int
    seconds: float
    shift_method: str
    kept: bool = False  # the SIF at path was already this conversion: left as it was


def source_date_epoch() -> int | None:
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is None or value == "":
        return None
    if not ascii_digits(value):
        raise UserError(f"SOURCE_DATE_EPOCH: {value!r} is not a number of seconds")
    return int(value)


def sif_labels(ref: str, image_id: str, config: ImageConfig) -> dict[str, str]:
    labels = dict(config.labels)
    labels.setdefault("org.label-schema.schema-version", "1.0")
    labels[facts.SIF_SOURCE_IMAGE] = ref
    labels[facts.SIF_SOURCE_ID] = image_id
    return labels


def _image(engine: Engine, ref: str) -> dict[str, Any]:

    try:
        info = engine.inspect(ref)
    except EngineError as exc:
        raise UserError(f"image {ref!r}: {' '.join(str(exc).split())}") from None
    if info is None:
        raise UserError(
            f"image {ref!r} not found in the local Docker engine (build it first: "
            f"hvd-container build RECIPE)"
        )
    return info


def check_arch(image_arch: str, wanted: str | None, ref: str) -> str:
    check_arch_flag(wanted)
    if image_arch not in fmt.ARCH_CODES:
        raise UserError(f"image {ref!r} has architecture {image_arch!r}, which SIF cannot record")
    if wanted is not None and wanted != image_arch:
        raise UserError(
            f"--arch {wanted}: image {ref!r} is built for {image_arch}; rebuild it for {wanted} "
            f"(recipe arch:) or drop --arch"
        )
    return image_arch


def up_to_date(
    target: Path, image_id: str, arch: str, compression: str, epoch: int | None
) -> SifInfo | None:
    """The SIF at target, where it is already what this conversion would write: made from the
    same image id (its label), for the same architecture, with the same compressor (and, under
    SOURCE_DATE_EPOCH, at that time); else None. A 2 GB image converts in a minute or more: a
    second `convert` of an unchanged image (a script run again) costs nothing."""
    if not target.is_file():
        return None
    try:
        info = read_sif(target)
        compressor = rootfs_compressor(info)
    except UserError:  # not a SIF, or a damaged one: converted again
        return None
    same = (
        info.labels.get(facts.SIF_SOURCE_ID) == image_id
        and info.arch == arch
        and compressor == compression
        and (epoch is None or info.created == epoch)
    )
    return info if same else None


def _guarded(chunks: Iterable[bytes], ref: str) -> Iterator[bytes]:
    """The export stream, with engine failures turned into one-line errors."""

    try:
        yield from chunks
    except EngineError as exc:
        raise StepFailed(f"docker export of {ref!r} failed: {exc}") from None


def image_bom(engine: Engine, image_id: str, ref: str, labels: Mapping[str, str]) -> bytes | None:
    """The bill of materials the image holds, checked against the digest its label records;
    None for an image built without one (no label). One that does not match is refused: the
    image was changed after its build, and its SIF would carry a false account of it."""
    recorded = labels.get(facts.BOM)
    if recorded is None:
        return None
    try:
        document = engine.read_file(image_id, facts.BOM_FILE)
    except EngineError as exc:
        reason = " ".join(str(exc).split())
        raise StepFailed(f"cannot read {facts.BOM_FILE} in {ref!r}: {reason}") from None
    found = facts.bom_digest(document) if document is not None else "no such file"
    if found != recorded:
        raise StepFailed(
            f"the bill of materials in {ref!r} does not match its label {facts.BOM} "
            f"({facts.BOM_FILE}: {found}; label: {recorded}): the image was changed after its "
            "build; build it again"
        )
    return document


def convert_image_to_sif(
    ref: str,
    target: str | os.PathLike[str],
    *,
    compression: str = "gzip",
    threads: int | None = None,
    arch: str | None = None,
    engine: Engine | None = None,
    on_step: Callable[[str], None] | None = None,
    on_transfer: OnTransfer | None = None,
) -> SifResult:
    """Convert the local Docker image ref into a SIF at target (see module docstring)."""

    # Flags first: a wrong --arch must not be reported as a missing image or engine.
    check_compressor(compression)
    check_arch_flag(arch)
    target = check_output_path(Path(target), ".sif")
    threads = threads or os.cpu_count() or 1
    epoch = source_date_epoch()
    engine = engine or open_engine()
    image = _image(engine, ref)
    image_id = str(image["Id"])
    image_arch = check_arch(image.get("Architecture", ""), arch, ref)
    kept = up_to_date(target, image_id, image_arch, compression, epoch)
    if kept is not None:
        (on_step or (lambda _msg: None))(
            f"{target} is already the SIF of {ref} ({image_id[:19]}, {compression}): kept"
        )
        return SifResult(
            path=target, image=ref, image_id=image_id, arch=image_arch, compression=compression,
            size=target.stat().st_size, rootfs_offset=kept.rootfs_offset,
            rootfs_size=kept.rootfs_size, seconds=0.0, shift_method="", kept=True,
        )  # fmt: skip
    config = ImageConfig.from_docker(image.get("Config"))
    labels = sif_labels(ref, image_id, config)
    bom = image_bom(engine, image_id, ref, config.labels)
    image_uuid = (
        uuid.uuid5(uuid.NAMESPACE_URL, f"hvd-container:{image_id}:{compression}")
        if epoch is not None
        else uuid.uuid4()
    )
    step = on_step or (lambda _msg: None)
    started = time.monotonic()
    step(f"exporting {ref} ({image_id[:19]}) through tar2sqfs ({compression}, {threads} jobs)")
    with contextlib.ExitStack() as stack:
        try:
            stream = stack.enter_context(engine.export(image_id))
        except EngineError as exc:
            reason = " ".join(str(exc).split())
            raise StepFailed(
                f"cannot create a container from {ref!r} to export it: {reason}"
            ) from None
        offset, rootfs_size, method = write_sif(
            _guarded(stream, ref),
            target,
            ref=ref,
            config=config,
            labels=labels,
            arch=image_arch,
            compression=compression,
            bom=bom,
            threads=threads,
            epoch=epoch,
            image_uuid=image_uuid,
            mode=creation_mode(SIF_MODE),
            # the engine's unpacked size: about what the export streams
            export_size=int(image["Size"]) if image.get("Size") else None,
            on_transfer=on_transfer,
        )
    return SifResult(
        path=target,
        image=ref,
        image_id=image_id,
        arch=image_arch,
        compression=compression,
        size=target.stat().st_size,
        rootfs_offset=offset,
        rootfs_size=rootfs_size,
        seconds=time.monotonic() - started,
        shift_method=method,
    )
