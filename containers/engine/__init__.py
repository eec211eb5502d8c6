"""Build engines: turn a build context into an image, reporting progress as events.

The interface is deliberately small so that another backend (BuildKit through a CLI, a remote
builder) can sit behind it: `BuildEngine.build(...)` yields `BuildEvent`s and finishes with one
event of kind "done" (carrying the image id) or raises StepFailed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

EventKind = Literal["step", "log", "cached", "done"]


@dataclass(frozen=True)
class BuildEvent:
    """One thing that happened during a build.

    step: 1-based index of the Dockerfile instruction it belongs to (None before the first).
    """

    kind: EventKind
    text: str
    step: int | None = None
    total: int | None = None
    image_id: str | None = None


class BuildEngine(Protocol):
    def build(
        self,
        context: Mapping[str, bytes],
        tag: str,
        buildargs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Iterator[BuildEvent]:
        """Build context (file name -> bytes, with a "Dockerfile") into an image tagged tag."""
        ...
