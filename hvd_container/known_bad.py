"""Library versions known to compute wrong results or fail, each with its source and its fix.

verify and doctor look the image's versions up here (`problems`); the smoke payloads test the
one a single GPU can show (the odd-length Average). An entry is a fact with its source: add one
only with an upstream issue or release note that says it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class KnownBad:
    library: str  # the key of the image's versions: nccl, horovod, torch, ...
    below: str  # versions before this one are affected
    since: str  # ... from this one on ("" = every earlier version)
    effect: str
    source: str
    fix: str

    def affects(self, version: str) -> bool:
        try:
            v = Version(version.split("+")[0])
        except InvalidVersion:
            return False
        return v < Version(self.below) and (not self.since or v >= Version(self.since))


NCCL_AVG = KnownBad(
    library="nccl",
    below="2.29.7",
    since="",
    effect="a one-rank ncclAvg reduction drops its tail elements (Horovod >= 0.28 maps Average "
    "to ncclAvg, torch.distributed's ReduceOp.AVG is ncclAvg)",
    source="NVIDIA/nccl issue 1950, pytorch/pytorch issue 168092",
    fix="use NCCL >= 2.29.7 (the image's nccl.version, or the torch whose nvidia-nccl wheel has it)",
)

NCCL_INPROCESS = KnownBad(
    library="nccl",
    below="2.28.9",
    since="2.28.3",
    effect="NVIDIA's resiliency extension (nvidia-resiliency-ext) restarts ranks in their process "
    "wrongly with it (its in-process restart issue)",
    source="NVIDIA/nvidia-resiliency-ext README, platform support: avoid NCCL 2.28.3-2.28.8 "
    "(read 2026-11-28)",
    fix="use NCCL < 2.28.3 or >= 2.28.9",
)

TABLE: tuple[KnownBad, ...] = (NCCL_AVG, NCCL_INPROCESS)


def problems(versions: Mapping[str, str | None]) -> list[tuple[KnownBad, str]]:
    """The entries that the given versions (library -> version) fall into, with the version."""
    found = []
    for entry in TABLE:
        version = versions.get(entry.library)
        if version and entry.affects(version):
            found.append((entry, version))
    return found
