"""The SIF writer: a root filesystem's tar stream -> a SIF file, written atomically.

Nothing is unpacked or saved as a tar on disk: the stream goes through a filter (which appends
/.singularity.d/) into tar2sqfs, which writes the squashfs straight into the temporary SIF next
to the target. The SIF header, descriptors and small objects are then put in front of it in
place (containers/sif/shift.py), and the file is renamed onto the target. Peak extra disk is
the final SIF's size.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.layout import DataObject, partition_offset, sif_prefix
from hvd_container.containers.sif.metadata import ImageConfig, is_replaced, singularity_tar
from hvd_container.containers.sif.shift import insert_front
from hvd_container.containers.sif.tarstream import TarFormatError, buffered, filter_tar
from hvd_container.containers.transfer import Counted, OnTransfer

from hvd_container.core.atomic import atomic_output
from hvd_container.core.errors import StepFailed, UserError, source_checkout_hint

_FULL_BELOW = 1024 * 1024


# Each compressor at its library's own default level (zlib 6, zstd 3), not tar2sqfs's (gzip 9,
# zstd 15, as mksquashfs): on the CPU recipe's 1.8 GB root filesystem, 2 jobs, gzip 6 took
# 30 s against 92 s for a SIF 0.5% larger, zstd 3 took 6 s against ~95 s (bench/convert.py
# --levels prints both side by side). Readers do not care which level wrote a block.
COMPRESSION_LEVELS = {"gzip": 6, "zstd": 3}


def tar2sqfs_argv(
    output: str, *, compression: str, threads: int, mtime: int, level: int | None = None
) -> list[str]:
    """tar2sqfs reading the tar on stdin (also the bare step of bench/convert.py).

    Files keep their own mtimes (tar2sqfs's default); `--defaults mtime=` only dates what the
    stream has no entry for: the root directory, implied parent directories and the
    superblock. --no-skip: fail on records it cannot read, never skip them. The level is
    COMPRESSION_LEVELS' unless given (the benchmark's comparison); xz keeps tar2sqfs's own.
    """
    level = COMPRESSION_LEVELS.get(compression) if level is None else level
    # Never add `-k`: since squashfs-tools-ng 0.7 (bookworm has 1.2.0) it is --no-keep-time,
    # which stamps every file with the default mtime and so breaks .pyc timestamp checks.
    return [
        "tar2sqfs",
        "--quiet",
        "--force",
        "--no-skip",
        "--compressor",
        compression,
        *(["--comp-extra", f"level={level}"] if level is not None else []),
        "--num-jobs",
        str(threads),
        "--defaults",
        f"mtime={mtime}",
        output,
    ]


def sif_objects(
    ref: str, config: ImageConfig, labels: dict[str, str], bom: bytes | None = None
) -> list[DataObject]:
    """The small objects Apptainer also writes: the definition, the OCI config; plus labels,
    and the image's bill of materials as an SBOM object (CycloneDX JSON) where it has one."""
    definition = f"bootstrap: docker-daemon\nfrom: {ref}\n"
    materials = (
        [
            DataObject(
                fmt.DATA_SBOM,
                bom,
                name="bom.cdx.json",
                extra=fmt.SBOM_EXTRA.pack(fmt.SBOM_CYCLONEDX_JSON),
            )
        ]
        if bom is not None
        else []
    )
    return [
        DataObject(fmt.DATA_DEFFILE, definition.encode()),
        DataObject(
            fmt.DATA_GENERIC_JSON,
            json.dumps(config.oci_config(), indent=2, sort_keys=True).encode(),
            name="oci-config.json",
        ),
        DataObject(
            fmt.DATA_LABELS,
            json.dumps(dict(sorted(labels.items())), indent=2).encode(),
            name="labels.json",
        ),
        *materials,
    ]


class _StderrTail(threading.Thread):
    """Drain a child's stderr so it never blocks; keep the last lines for the error message."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self._stream = stream
        self.lines: list[str] = []

    def run(self) -> None:
        for raw in self._stream:
            self.lines = (self.lines + [raw.decode(errors="replace").rstrip()])[-20:]

    def text(self) -> str:
        return "; ".join(line for line in self.lines if line)


def _device_full(fd: int) -> bool:
    stats = os.fstatvfs(fd)
    return stats.f_bavail * stats.f_frsize < _FULL_BELOW


def _enospc(target: Path) -> UserError:
    return UserError(
        f"no space left on the device holding {target.parent or '.'} while writing {target.name}; "
        f"free space there or choose another output path (nothing was left behind)"
    )


def write_sif(
    export_chunks: Any,
    target: Path,
    *,
    ref: str,
    config: ImageConfig,
    labels: dict[str, str],
    arch: str,
    compression: str,
    bom: bytes | None = None,
    threads: int,
    epoch: int | None,
    image_uuid: uuid.UUID,
    mode: int = 0o644,
    export_size: int | None = None,
    on_transfer: OnTransfer | None = None,
) -> tuple[int, int, str]:
    """Write the SIF at target from a tar stream of the root filesystem.

    Returns (rootfs offset, rootfs size, shift method). Atomic: on any error (including
    interruption) target is untouched and no temporary file stays behind. on_transfer hears
    the bytes exported (of about export_size) and the compressed bytes written so far.
    """
    created = epoch if epoch is not None else int(time.time())
    objects = sif_objects(ref, config, labels, bom)
    offset = partition_offset(objects)
    extra = singularity_tar(config, labels, created)
    try:
        with atomic_output(target, mode=mode) as fh:
            fd = fh.fileno()
            argv = tar2sqfs_argv(
                f"/dev/fd/{fd}", compression=compression, threads=threads, mtime=created
            )
            try:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(fd,)
                )
            except FileNotFoundError:
                raise UserError(
                    "tar2sqfs not found: install squashfs-tools-ng (the Debian/Ubuntu package of "
                    f"that name; {source_checkout_hint('sif-tools.sh up')})"
                ) from None
            stderr = _StderrTail(proc.stderr)
            stderr.start()
            broken = False
            try:
                try:
                    assert proc.stdin is not None
                    chunks = Counted(
                        export_chunks,
                        "export",
                        export_size,
                        on_transfer,
                        written=lambda: os.fstat(fd).st_size,
                    )
                    filter_tar(
                        buffered(chunks),
                        proc.stdin,
                        drop=is_replaced,
                        append=extra,
                        clamp_mtime=epoch,
                    )
                    proc.stdin.close()
                except BrokenPipeError:
                    broken = True
                except TarFormatError as exc:
                    raise StepFailed(
                        f"docker export of {ref!r} gave a bad tar stream: {exc}"
                    ) from None
                rc = proc.wait()
                if rc == 0 and not broken:
                    chunks.finish()  # tar2sqfs is done: the squashfs is all written
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                with contextlib.suppress(BrokenPipeError, ValueError):
                    if proc.stdin:
                        proc.stdin.close()
                stderr.join(timeout=5)
            if rc != 0 or broken:
                message = stderr.text()
                # tar2sqfs reports a full disk only as "I/O error": look at the free space.
                if "No space left" in message or _device_full(fd):
                    raise _enospc(target)
                raise StepFailed(f"tar2sqfs failed (exit {rc}): {message or 'no message'}")
            rootfs_size = os.fstat(fd).st_size
            prefix = sif_prefix(
                objects, partition_size=rootfs_size, arch=arch, created=created, image_id=image_uuid
            )
            assert len(prefix) == offset
            try:
                method = insert_front(fd, offset)
                os.pwrite(fd, prefix, 0)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise _enospc(target) from None
                raise
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise _enospc(target) from None
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise UserError(f"--output {target}: cannot write there: {exc.strerror}") from None
        raise
    return offset, rootfs_size, method
