"""Squashfs compressors offered for SIF conversion."""

from __future__ import annotations

from hvd_container.core.errors import UserError

# gzip first: every Singularity/Apptainer version mounts it; zstd needs Apptainer >= 1.1 on the
# cluster side (squashfuse/kernel support), xz is smallest and slowest. The level each one writes
# at: sif/writer.py's COMPRESSION_LEVELS.
COMPRESSORS = ("gzip", "zstd", "xz")


def check_compressor(name: str) -> str:
    if name not in COMPRESSORS:
        raise UserError(
            f"--compression: unknown compressor {name!r} (allowed: {', '.join(COMPRESSORS)})"
        )
    return name
