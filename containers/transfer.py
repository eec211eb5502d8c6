"""How far a long copy has come: the bytes of an image exported into a SIF, of a layer pushed.

The library reports Transfer records through a callback; the CLI shows them (a rich bar on a
terminal, plain lines, or JSON lines) and works out rate and ETA from their times.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Transfer:
    phase: str  # "export" (convert) or "push"
    done: int  # bytes so far
    total: int | None = None  # bytes expected, when known
    item: str = ""  # a layer id (push)
    written: int | None = None  # bytes written out so far (the compressed SIF), when known


OnTransfer = Callable[[Transfer], None]


def counted(
    chunks: Iterable[bytes],
    phase: str,
    total: int | None,
    on_transfer: OnTransfer | None,
    written: Callable[[], int] | None = None,
    every: float = 0.2,
) -> Iterator[bytes]:
    """chunks as they come, reporting the bytes passed at most every `every` seconds, and once
    at the end."""
    if on_transfer is None:
        yield from chunks
        return
    done, last = 0, time.monotonic()
    for chunk in chunks:
        done += len(chunk)
        now = time.monotonic()
        if now - last >= every:
            last = now
            on_transfer(Transfer(phase, done, total, written=written() if written else None))
        yield chunk
    on_transfer(Transfer(phase, done, total, written=written() if written else None))
