"""Pure parts of the build: the phases and base the printer hands back, build digest,
build-stream parsing."""

from __future__ import annotations

import io
import tarfile

import pytest
from hvd_container.containers.build import build_digest
from hvd_container.containers.engine.docker_api import (
    TAIL_LINES,
    BuildFailed,
    context_tar,
    parse_build_stream,
)
from hvd_container.containers.printers.dockerfile import MARKER_PREFIX
from hvd_container.containers.recipe_loader import list_builtin, load_recipe
from hvd_container.containers.render import docker_build


def steps_of(dockerfile: str) -> list[str]:
    """The builder's steps, counted as the classic builder does: one per instruction,
    continuation lines joined, comments and blank lines skipped (the oracle for the phases
    the printer hands back)."""
    steps: list[str] = []
    continued = False
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if continued:
            steps[-1] += " " + line
        elif line and not line.startswith("#"):
            steps.append(line)
        continued = line.endswith("\\")
    return steps


@pytest.mark.parametrize("name", list_builtin())
def test_the_printer_hands_back_each_steps_phase_and_the_base(name: str) -> None:
    recipe = load_recipe(name)
    build = docker_build(recipe)
    steps = steps_of(build.dockerfile)
    assert len(build.phases) == len(steps)
    assert build.phases[0] == "base" and build.phases[-1] == "checks"
    froms = [step.split() for step in steps if step.startswith("FROM ")]
    # FROM [--platform=...] IMAGE [AS NAME]: the first starts from the base image, any later one
    # from the base or an earlier stage
    names = {words[-1] for words in froms if words[-2] == "AS"}
    starts = {words[-3] if words[-2] == "AS" else words[-1] for words in froms}
    assert starts - names == {build.base} and build.base in froms[0]
    markers = [
        ln.split(": ", 1)[1] for ln in build.dockerfile.splitlines() if ln.startswith(MARKER_PREFIX)
    ]
    assert list(dict.fromkeys(build.phases)) == list(dict.fromkeys(markers))
    if recipe.horovod is not None:
        horovod_step = next(
            i for i, ln in enumerate(steps) if "hvd_src=" in ln or "horovodrun --check-build" in ln
        )
        assert build.phases[horovod_step] == "horovod"


def test_build_digest_is_order_free_and_content_sensitive() -> None:
    a = {"Dockerfile": b"FROM x\n", "hvd-pip": b"#!/bin/sh\n"}
    b = dict(reversed(list(a.items())))
    assert build_digest(a) == build_digest(b)
    assert build_digest(a) != build_digest({**a, "Dockerfile": b"FROM y\n"})
    # a file name is part of the digest, not only the bytes
    assert build_digest({"a": b"1"}) != build_digest({"b": b"1"})
    # so is the base image's ID (a remade base, same name) and whether the engine has it at all
    assert build_digest(a, "sha256:1") != build_digest(a, "sha256:2")
    assert build_digest(a, "sha256:1") != build_digest(a)
    assert build_digest(a, "sha256:1") == build_digest(b, "sha256:1")


def test_context_tar_is_reproducible_and_keeps_scripts_executable() -> None:
    files = {"Dockerfile": b"FROM x\n", "hvd-pip": b"#!/bin/sh\necho\n"}
    assert context_tar(files) == context_tar(dict(reversed(list(files.items()))))
    with tarfile.open(fileobj=io.BytesIO(context_tar(files))) as tar:
        modes = {m.name: m.mode for m in tar.getmembers()}
    assert modes == {"Dockerfile": 0o644, "hvd-pip": 0o755}


def _stream(*texts: str, error: str | None = None, image: str | None = "sha256:abc"):
    for t in texts:
        yield {"stream": t}
    if error:
        yield {"error": error, "errorDetail": {"message": error}}
    if image:
        yield {"aux": {"ID": image}}


def test_stream_becomes_step_log_cached_and_done_events() -> None:
    events = list(
        parse_build_stream(
            _stream(
                "Step 1/2 : FROM base\n",
                " ---> 1234\n",
                "Step 2/2 : RUN echo hi\n",
                " ---> Using cache\n",
                " ---> Running in ff\n",
                "hi\npartial ",
                "line\n",
                "Successfully built abc\n",
            )
        )
    )
    kinds = [(e.kind, e.step, e.text) for e in events]
    assert kinds == [
        ("step", 1, "FROM base"),
        ("step", 2, "RUN echo hi"),
        ("cached", 2, "---> Using cache"),
        ("log", 2, "hi"),
        ("log", 2, "partial line"),
        ("done", 2, "sha256:abc"),
    ]
    assert events[-1].image_id == "sha256:abc"


def test_failing_step_names_instruction_and_keeps_last_lines() -> None:
    output = "".join(f"line {i}\n" for i in range(100))
    with pytest.raises(BuildFailed) as info:
        list(
            parse_build_stream(
                _stream(
                    "Step 1/3 : FROM base\n",
                    "Step 2/3 : RUN make\n",
                    output,
                    error="The command '/bin/sh -c make' returned a non-zero code: 2",
                    image=None,
                )
            )
        )
    exc = info.value
    assert exc.step == 2 and exc.instruction == "RUN make"
    assert len(exc.tail) == TAIL_LINES and exc.tail[-1] == "line 99"
    assert str(exc).startswith("build failed at step 2/3 `RUN make`: The command")
    assert "\n" not in str(exc)
    assert exc.exit_code == 1


def test_stream_without_image_is_a_failure() -> None:
    with pytest.raises(BuildFailed, match="without producing an image"):
        list(parse_build_stream(_stream("Step 1/1 : FROM x\n", image=None)))


class _EngineAfterAKill:
    """A stand-in for docker-py's APIClient after a build step exited 137 (a real engine
    cannot be made to OOM-kill a step or to stay stopped here): its ping and its events."""

    def __init__(self, answers: bool, actions: list[str]) -> None:
        self.answers, self.actions = answers, actions

    def ping(self) -> bool:
        if not self.answers:
            import requests

            raise requests.exceptions.ConnectionError("connection refused")
        return True

    def events(self, **_: object) -> list[dict[str, str]]:
        return [{"Type": "container", "Action": a} for a in self.actions]


@pytest.mark.parametrize(
    ("answers", "actions", "says"),
    [
        (False, [], "the Docker engine stopped during the build: start it"),
        (True, [], "the Docker engine restarted during this step: run the same build again"),
        (True, ["create", "start", "oom", "die"], "the step ran out of memory"),
        (True, ["create", "start", "kill", "die"], None),  # someone else's kill: not guessed
    ],
)
def test_a_killed_step_says_who_killed_it(
    answers: bool, actions: list[str], says: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hvd_container.containers.engine import docker_api

    monkeypatch.setattr(docker_api, "RESTART_WAIT", 0.0)
    engine = docker_api.DockerEngine(client=_EngineAfterAKill(answers, actions))
    why = engine._why_killed(since=0)
    assert (why is None) if says is None else (why or "").startswith(says)


def test_buildahs_stream_through_podmans_api_gives_the_same_events() -> None:
    # the lines podman 4.3's Docker-compatible build endpoint sent for cpu-bookworm-torch
    events = list(
        parse_build_stream(
            _stream(
                "STEP 1/21: FROM hvd-base/debian:bookworm\n",
                "STEP 2/21: ARG DEBIAN_FRONTEND=noninteractive\n",
                "--> Using cache 26353546273f2d8c\n",
                "--> 26353546273\n",
                "STEP 21/21: RUN python -c 'import torch; print(torch.__version__)'\n",
                "2.13.0+cpu\n",
                "COMMIT\n",
                "--> 708dbf9585c\n",
                "708dbf9585c5715ef8de9720a1a9bc9263d39cf04b0b2e4d775faf3cece6f3c2\n",
                "Successfully built 708dbf9585c5\n",
                image="sha256:708dbf9585c5",
            )
        )
    )
    kinds = [(e.kind, e.step, e.total, e.text) for e in events]
    assert kinds == [
        ("step", 1, 21, "FROM hvd-base/debian:bookworm"),
        ("step", 2, 21, "ARG DEBIAN_FRONTEND=noninteractive"),
        ("cached", 2, 21, "---> Using cache"),
        ("step", 21, 21, "RUN python -c 'import torch; print(torch.__version__)'"),
        ("log", 21, 21, "2.13.0+cpu"),
        ("done", 21, 21, "sha256:708dbf9585c5"),
    ]


def test_buildahs_steps_of_a_build_of_several_stages_say_their_stage() -> None:
    # buildah numbers the steps of each stage, and may start a later stage first
    events = list(
        parse_build_stream(
            _stream(
                "[1/3] STEP 1/13: FROM hvd-base/debian:bookworm AS horovod-deps\n",
                "[3/3] STEP 7/15: COPY --from=horovod-wheel /opt/hvd/wheels/ /opt/hvd/wheels/\n",
                "[2/3] STEP 6/6: RUN hvd-pip wheel -w /opt/hvd/wheels .\n",
                "--> Using cache 26353546273f2d8c\n",
                image="sha256:708dbf9585c5",
            )
        )
    )
    assert [(e.kind, e.stage, e.step, e.total, e.text) for e in events] == [
        ("step", 1, 1, 13, "FROM hvd-base/debian:bookworm AS horovod-deps"),
        ("step", 3, 7, 15, "COPY --from=horovod-wheel /opt/hvd/wheels/ /opt/hvd/wheels/"),
        ("step", 2, 6, 6, "RUN hvd-pip wheel -w /opt/hvd/wheels ."),
        ("cached", 2, 6, 6, "---> Using cache"),
        ("done", None, 6, 6, "sha256:708dbf9585c5"),
    ]
