"""The FAKES the fast tests share, in one module (tests never import tests):

- FakeEngine: the `Engine` protocol (containers/engine/__init__.py) over a dict of images, with
  no Docker and no docker-py below it. Builds succeed with a new id (or fail at a step),
  containers answer through a Python function, and it records what it was asked.
- FakeDockerAPI and FakeDockerEngine: docker.APIClient and the Docker backend's build stood in
  for, where a test is about what the Docker backend adds.
- write_sif: a real SIF header (the project's writer) in front of a stand-in partition.

The Docker backend itself is tested against the real engine (tests/e2e/)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import tarfile
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import docker.errors
from hvd_container.containers.engine import BuildEvent
from hvd_container.containers.engine.docker_api import DockerEngine
from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.layout import DataObject, sif_prefix

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
        runnable_elsewhere: bool = False,
    ) -> None:
        self.images: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (images or {}).items()}
        self.runnable_elsewhere = runnable_elsewhere  # as podman-hpc's squashed store
        self.runner = run
        self.fail_at_step = fail_at_step
        self.builds: list[tuple[str, dict[str, str], dict[str, str]]] = []  # tag, args, labels
        self.contexts: list[tuple[str, str]] = []  # tag, Dockerfile
        self.sent: list[dict[str, bytes]] = []  # each build's whole context
        self.ran: list[list[str]] = []
        self.removed: list[str] = []
        self.pushed: list[str] = []
        self.pulled: list[str] = []
        self.registry: dict[str, dict[str, Any]] = {}  # what a push put there, by remote name
        self.push_error: str | None = None  # a push refused with this message
        self.pull_error: Exception | None = None
        self.made_runnable: list[tuple[str, str]] = []  # tag, its image id then

    def build(
        self,
        context: Mapping[str, bytes],
        tag: str,
        buildargs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Iterator[BuildEvent]:
        self.builds.append((tag, dict(buildargs or {}), dict(labels or {})))
        self.contexts.append((tag, context["Dockerfile"].decode()))
        self.sent.append(dict(context))
        steps = [line for line in context["Dockerfile"].decode().splitlines() if line[:1].isalpha()]
        for number, step in enumerate(steps, 1):
            yield BuildEvent("step", step, number, len(steps))
            if number == self.fail_at_step:
                raise StepFailed(f"step {number} failed: {step}")
        digest = hashlib.sha256(repr((sorted(context.items()), tag, labels)).encode()).hexdigest()
        image_id = f"sha256:{digest}"
        parent = self.images.get(steps[0].split()[-1], {}) if labels else {}
        copied = {
            words[2]: context[words[1]]
            for words in (step.split() for step in steps)
            if words[0] == "COPY" and words[1] in context
        }
        self.images[image_id] = {
            "Id": image_id,
            "RepoTags": [tag] if tag else [],
            "Architecture": parent.get("Architecture", "amd64"),
            "Config": {
                "Labels": {**(parent.get("Config") or {}).get("Labels", {}), **(labels or {})}
            },
            "Files": {**(parent.get("Files") or {}), **copied},
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
        if self.push_error:
            yield {"error": self.push_error}
            return
        if f"{repository}:{tag}" in self.images:
            self.registry[f"{repository}:{tag}"] = self.images[f"{repository}:{tag}"]
        yield {"status": "Pushed"}

    def pull(self, repository: str, tag: str, auth: Mapping[str, str] | None) -> bool:
        self.pulled.append(f"{repository}:{tag}")
        if self.pull_error is not None:
            raise self.pull_error
        if f"{repository}:{tag}" not in self.registry:
            return False
        self.images[f"{repository}:{tag}"] = self.registry[f"{repository}:{tag}"]
        return True

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

    def read_file(self, ref: str, path: str) -> bytes | None:
        files = self.images.get(ref, {}).get("Files") or {}
        return files.get(path)

    def bridge_gateway(self) -> str:
        return "127.0.0.1"

    def make_runnable(self, ref: str) -> str | None:
        if not self.runnable_elsewhere:
            return None
        self.made_runnable.append((ref, self.images[ref]["Id"]))
        return f"{ref} copied where the runtime reads it"


GOLDEN = Path(__file__).parent.parent / "golden" / "checkbuild" / "cpu-bookworm.txt"
BASE = "hvd-base/debian:bookworm"
NEW_ID = "sha256:" + "ab" * 32
VERSIONS = 'HVD-VERSIONS {"python": "3.11.2", "torch": "2.13.0+cpu", "horovod": "0.28.1"}'

Runner = Callable[[list[str]], tuple[int, str]]


def good_image(argv: list[str]) -> tuple[int, str]:
    """What the commands print in a correct CPU image."""
    if argv[:2] == ["horovodrun", "--check-build"]:
        return 0, GOLDEN.read_text()
    if argv[:2] == ["python", "-c"] and "HVD-VERSIONS" in argv[2]:
        return 0, VERSIONS
    return 0, "0\n"


class FakeDockerAPI:
    """A FAKE docker.APIClient: images in a dict, containers that run a Python function."""

    def __init__(self, images: dict[str, dict[str, Any]], run: Runner = good_image) -> None:
        self.images = images
        self.run = run
        self.gateway = "127.0.0.1"
        self.live: dict[str, list[str]] = {}
        self.removed_images: list[str] = []
        self.label_builds = 0
        self.start_error: Exception | None = None
        self.wait_error: Exception | None = None
        self.pushed: list[tuple[str, str]] = []
        self.push_stream: list[dict[str, Any]] = []
        self.distribution: dict[str, Any] | Exception = {}
        self.auth_configs: list[tuple[str, Any]] = []  # (call, auth_config) of push/read-back
        self._exit: dict[str, tuple[int, str]] = {}

    # images
    def inspect_image(self, ref: str) -> dict[str, Any]:
        if ref not in self.images:
            raise docker.errors.ImageNotFound(f"No such image: {ref}")
        return self.images[ref]

    def remove_image(self, ref: str, noprune: bool = False) -> None:
        """Untag a tag (the image goes with its last tag) or delete an image id."""
        self.removed_images.append(ref)
        info = self.images.pop(ref)
        tags = info.get("RepoTags") or []
        if ref in tags and len(tags) > 1:
            info["RepoTags"] = [t for t in tags if t != ref]
            return
        for key in [k for k, v in self.images.items() if v is info]:
            del self.images[key]

    def tag(self, image: str, repo: str, tag: str) -> None:
        info = self.images[image]
        info["RepoTags"] = [*(info.get("RepoTags") or [image]), f"{repo}:{tag}"]
        self.images[f"{repo}:{tag}"] = info

    def build(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.label_builds += 1  # the labelling build: only reached after verification
        labels = dict(kwargs.get("labels") or {})
        self.images[kwargs["tag"]] = {
            "Id": "sha256:labelled",
            "RepoTags": [kwargs["tag"]],
            "Config": {"Labels": labels},
        }
        yield {"aux": {"ID": "sha256:labelled"}}

    # networks
    def networks(self, names: list[str] | None = None) -> list[dict[str, Any]]:
        return [{"IPAM": {"Config": [{"Gateway": self.gateway}]}}]

    # containers
    def create_container(self, image: str, command: list[str], **_: Any) -> dict[str, str]:
        cid = f"c{len(self.live) + len(self._exit)}"
        self.live[cid] = command
        return {"Id": cid}

    def start(self, cid: str) -> None:
        if self.start_error:
            raise self.start_error
        self._exit[cid] = self.run(self.live[cid])

    def wait(self, cid: str, timeout: int | None = None) -> dict[str, int]:
        if self.wait_error:
            raise self.wait_error
        return {"StatusCode": self._exit[cid][0]}

    def logs(self, cid: str, **_: Any) -> bytes:
        return self._exit[cid][1].encode()

    def remove_container(self, cid: str, force: bool = False) -> None:
        del self.live[cid]

    # registry
    def push(
        self, repo: str, tag: str, auth_config: Any = None, **_: Any
    ) -> Iterator[dict[str, Any]]:
        self.pushed.append((repo, tag))
        self.auth_configs.append(("push", auth_config))
        yield from self.push_stream

    def inspect_distribution(self, image: str, auth_config: Any = None) -> dict[str, Any]:
        self.auth_configs.append(("distribution", auth_config))
        if isinstance(self.distribution, Exception):
            raise self.distribution
        return self.distribution


class FakeDockerEngine(DockerEngine):
    """A FAKE build on the FAKE engine API: records the build args; the build 'succeeds' with
    image NEW_ID (labelling builds go to FakeDockerAPI.build).

    While the build runs it fetches pip.conf from the pip config server, as hvd-pip would.
    """

    def __init__(self, api: FakeDockerAPI) -> None:
        super().__init__(api)
        self.api = api
        self.buildargs: dict[str, str] = {}
        self.pip_conf: str | None = None

    def build(
        self,
        context: Mapping[str, bytes],
        tag: str,
        buildargs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Iterator[BuildEvent]:
        if labels:  # the metadata-only labelling build: the FAKE engine API's
            yield from super().build(context, tag, buildargs, labels)
            return
        self.buildargs = dict(buildargs or {})
        url = self.buildargs.get("HVD_PIP_CONFIG_URL")
        if url:
            direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            self.pip_conf = direct.open(f"{url}/pip.conf", timeout=10).read().decode()
        yield BuildEvent("step", "FROM x", 1, 1)
        self.api.images[NEW_ID] = {"Id": NEW_ID, "RepoTags": [], "Architecture": "amd64"}
        yield BuildEvent("done", NEW_ID, 1, 1, image_id=NEW_ID)


def write_sif(path: Path, labels: dict[str, str] | None = None) -> Path:
    """A real SIF header (the project's writer) in front of a stand-in partition."""
    objs = [DataObject(fmt.DATA_LABELS, json.dumps(labels or {}).encode(), name="labels.json")]
    payload = b"hsqs" + bytes(4092)
    prefix = sif_prefix(
        objs,
        partition_size=len(payload),
        arch="amd64",
        created=1700000000,
        image_id=uuid.UUID(int=3),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(prefix + payload)
    return path
