"""A FAKE engine for the fast flow tests: the `Engine` protocol (containers/engine/__init__.py)
over a dict of images, with no Docker and no docker-py below it. Builds succeed with a new id
(or fail at a step), containers answer through a Python function, and it records what it was
asked. The Docker backend itself is tested against the real engine (tests/e2e/)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import tarfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from hvd_container.containers.engine import BuildEvent

from hvd_container.core.errors import StepFailed

Runner = Callable[[list[str]], tuple[int, str]]


def _everything_passes(argv: list[str]) -> tuple[int, str]:
    return 0, ""


class FakeEngine:
    """FAKE: images in a dict; what was built, tagged, removed, pushed and run is recorded."""

    def __init__(
        self,
        images: Mapping[str, Mapping[str, Any]] | None = None,
        run: Runner = _everything_passes,
        fail_at_step: int | None = None,
    ) -> None:
        self.images: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (images or {}).items()}
        self.runner = run
        self.fail_at_step = fail_at_step
        self.builds: list[tuple[str, dict[str, str], dict[str, str]]] = []  # tag, args, labels
        self.ran: list[list[str]] = []
        self.removed: list[str] = []
        self.pushed: list[str] = []

    def build(
        self,
        context: Mapping[str, bytes],
        tag: str,
        buildargs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Iterator[BuildEvent]:
        self.builds.append((tag, dict(buildargs or {}), dict(labels or {})))
        steps = [line for line in context["Dockerfile"].decode().splitlines() if line[:1].isalpha()]
        for number, step in enumerate(steps, 1):
            yield BuildEvent("step", step, number, len(steps))
            if number == self.fail_at_step:
                raise StepFailed(f"step {number} failed: {step}")
        digest = hashlib.sha256(repr((sorted(context.items()), tag, labels)).encode()).hexdigest()
        image_id = f"sha256:{digest}"
        parent = self.images.get(steps[0].split()[-1], {}) if labels else {}
        self.images[image_id] = {
            "Id": image_id,
            "RepoTags": [tag] if tag else [],
            "Architecture": parent.get("Architecture", "amd64"),
            "Config": {
                "Labels": {**(parent.get("Config") or {}).get("Labels", {}), **(labels or {})}
            },
        }
        if tag:
            self.images[tag] = self.images[image_id]
        yield BuildEvent("done", image_id, len(steps), len(steps), image_id=image_id)

    def inspect(self, ref: str) -> dict[str, Any] | None:
        return self.images.get(ref)

    def tag(self, ref: str, repository: str, tag: str) -> None:
        self.images[f"{repository}:{tag}"] = self.images[ref]

    def remove(self, ref: str) -> None:
        self.removed.append(ref)
        self.images.pop(ref, None)

    def push(
        self, repository: str, tag: str, auth: Mapping[str, str] | None
    ) -> Iterator[dict[str, Any]]:
        self.pushed.append(f"{repository}:{tag}")
        yield {"status": "Pushed"}

    def registry_digest(self, remote: str, auth: Mapping[str, str] | None) -> str | None:
        return "sha256:" + "0" * 64 if remote in self.pushed else None

    def run(
        self, image: str, argv: list[str], *, timeout: int, labels: Mapping[str, str]
    ) -> tuple[int, str]:
        self.ran.append(argv)
        return self.runner(argv)

    @contextlib.contextmanager
    def export(self, ref: str) -> Iterator[Iterator[bytes]]:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w"):
            pass
        yield iter([buffer.getvalue()])

    def bridge_gateway(self) -> str:
        return "127.0.0.1"
