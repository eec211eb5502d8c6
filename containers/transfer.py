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
    seconds: float | None = None  # since the transfer began, when the reporter knows


OnTransfer = Callable[[Transfer], None]


class Counted:
    """chunks as they come, reporting the bytes passed at most every `every` seconds; finish()
    reports the end (a reader may stop before the iterator runs out: a tar's end marker)."""

    def __init__(
        self,
        chunks: Iterable[bytes],
        phase: str,
        total: int | None,
        on_transfer: OnTransfer | None,
        written: Callable[[], int] | None = None,
        every: float = 0.2,
    ) -> None:
        self.chunks, self.phase, self.total = chunks, phase, total
        self.on_transfer, self.written, self.every = on_transfer, written, every
        self.done = 0
        self.started = time.monotonic()

    def _report(self) -> None:
        if self.on_transfer is not None:
            written = self.written() if self.written else None
            seconds = time.monotonic() - self.started
            transfer = Transfer(self.phase, self.done, self.total, written=written, seconds=seconds)
            self.on_transfer(transfer)

    def __iter__(self) -> Iterator[bytes]:
        self.started = last = time.monotonic()
        for chunk in self.chunks:
            self.done += len(chunk)
            now = time.monotonic()
            if now - last >= self.every:
                last = now
                self._report()
            yield chunk

    def finish(self) -> None:
        self._report()
