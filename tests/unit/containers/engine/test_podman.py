"""Which engine a command opens, and podman's API service: found, started, refused.

The real rootless build is tests/e2e/test_podman_rootless.py; here the choices and the errors,
with real unix sockets and a stand-in `podman` program where one must fail."""

from __future__ import annotations

import getpass
import json
import os
import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hvd_container.containers.engine import accepts, chosen_engine, open_engine
from hvd_container.containers.engine import podman as podman_module
from hvd_container.containers.engine.docker_api import DockerEngine

from hvd_container.core.errors import StepFailed, UserError


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "engine.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
        sock.listen(1)
        yield path


def _no_docker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("hvd_container.containers.engine.DOCKER_SOCKET", str(tmp_path / "none"))


def test_a_named_engine_is_taken_as_named() -> None:
    assert chosen_engine("podman", {}) == "podman"
    assert chosen_engine(None, {"HVD_ENGINE": "podman"}) == "podman"
    assert chosen_engine("docker", {"HVD_ENGINE": "podman"}) == "docker"  # the flag wins


def test_an_unknown_engine_names_where_it_came_from() -> None:
    with pytest.raises(UserError, match=r"^--engine: engine 'buildkit' is not known \(allowed: "):
        chosen_engine("buildkit", {})
    with pytest.raises(UserError, match=r"^\$HVD_ENGINE: engine 'dokcer' is not known"):
        chosen_engine(None, {"HVD_ENGINE": "dokcer"})
    # the flag named it, even where the variable says the same
    with pytest.raises(UserError, match=r"^--engine: engine 'dokcer' is not known"):
        chosen_engine("dokcer", {"HVD_ENGINE": "dokcer"})


def test_auto_takes_docker_where_it_answers(
    monkeypatch: pytest.MonkeyPatch, listening: Path
) -> None:
    monkeypatch.setattr("hvd_container.containers.engine.DOCKER_SOCKET", str(listening))
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/podman")
    assert chosen_engine(None, {}) == "docker"


def test_auto_takes_podman_where_docker_does_not_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _no_docker(monkeypatch, tmp_path)
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/podman")
    assert chosen_engine(None, {}) == "podman"
    assert chosen_engine(None, {"DOCKER_HOST": "tcp://builder:2375"}) == "docker"
    # neither: Docker, whose error says how to start it
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert chosen_engine(None, {}) == "docker"


def test_accepts_only_a_listening_socket(listening: Path, tmp_path: Path) -> None:
    assert accepts(listening)
    assert not accepts(tmp_path / "missing.sock")
    plain = tmp_path / "file"
    plain.write_text("")
    assert not accepts(plain)


def test_podmans_socket_from_container_host_must_be_unix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTAINER_HOST", "ssh://me@builder/run/podman.sock")
    with pytest.raises(UserError, match=r"^\$CONTAINER_HOST=ssh://.*unix socket only"):
        podman_module.service_url()
    monkeypatch.setenv("CONTAINER_HOST", "unix:///run/user/7/podman/podman.sock")
    assert podman_module.service_url() == "unix:///run/user/7/podman/podman.sock"


def test_a_running_user_service_is_used(monkeypatch: pytest.MonkeyPatch, listening: Path) -> None:
    monkeypatch.delenv("CONTAINER_HOST", raising=False)
    monkeypatch.setattr(podman_module, "user_socket", lambda: listening)
    assert podman_module.service_url() == f"unix://{listening}"


def test_no_podman_on_path_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CONTAINER_HOST", raising=False)
    monkeypatch.setattr(podman_module, "user_socket", lambda: tmp_path / "none.sock")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match=r"^--engine podman: podman is not on PATH \(install it"):
        podman_module.service_url()


def test_a_service_that_cannot_start_says_why_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "bin" / "podman"  # stand-in: podman that fails as a bad subuid setup does
    fake.parent.mkdir()
    fake.write_text(
        '#!/bin/sh\necho "Error: cannot set up namespace using newuidmap" >&2\nexit 125\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.delenv("CONTAINER_HOST", raising=False)
    monkeypatch.setattr(podman_module, "user_socket", lambda: tmp_path / "none.sock")
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.raises(UserError) as info:
        podman_module.service_url()
    assert str(info.value).startswith(
        "--engine podman: `podman system service` did not start: Error: cannot set up "
        "namespace using newuidmap (check `podman info`"
    )
    assert list((tmp_path / "tmp").iterdir()) == []  # its folder is gone


class _Client:
    """Records what the engine asks of docker-py's APIClient."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def build(self, **kw: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(("build", kw))
        yield {"stream": "STEP 1/1: FROM x\n"}
        yield {"aux": {"ID": "sha256:1"}}

    def create_host_config(self, **kw: Any) -> dict[str, Any]:
        return {"NetworkMode": kw["network_mode"]}

    def create_container(self, image: str, **kw: Any) -> dict[str, str]:
        self.calls.append(("create_container", kw))
        return {"Id": "c1"}

    def start(self, cid: str) -> None: ...

    def wait(self, cid: str, timeout: int) -> dict[str, int]:
        return {"StatusCode": 0}

    def logs(self, cid: str, **kw: Any) -> bytes:
        return b"ok\n"

    def remove_container(self, cid: str, **kw: Any) -> None: ...


def test_a_host_network_engine_builds_and_runs_on_the_hosts_network() -> None:
    client = _Client()
    engine = DockerEngine(client, host_network=True)
    assert [e.kind for e in engine.build({"Dockerfile": b"FROM x\n"}, "t")] == ["step", "done"]
    assert engine.run("x", ["true"], timeout=5, labels={}) == (0, "ok\n")
    build, create = (kw for _, kw in client.calls)
    assert build["network_mode"] == "host"
    assert create["host_config"] == {"NetworkMode": "host"}
    assert engine.bridge_gateway() == "127.0.0.1"  # the pip config server listens on loopback
    # the Docker engine's own: its default network for both
    client = _Client()
    engine = DockerEngine(client)
    list(engine.build({"Dockerfile": b"FROM x\n"}, "t"))
    engine.run("x", ["true"], timeout=5, labels={})
    build, create = (kw for _, kw in client.calls)
    assert build["network_mode"] is None and create["host_config"] is None


def test_open_engine_refuses_an_unknown_name_before_connecting() -> None:
    with pytest.raises(UserError, match="engine 'rkt' is not known"):
        open_engine("rkt")


# podman-hpc: NERSC's store, reached through `podman-hpc system service`; built images migrated.

STANDINS = Path(__file__).resolve().parents[3] / "e2e" / "standins"


def test_podman_hpc_is_named_never_guessed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert chosen_engine("podman-hpc", {}) == "podman-hpc"
    assert chosen_engine(None, {"HVD_ENGINE": "podman-hpc"}) == "podman-hpc"
    _no_docker(monkeypatch, tmp_path)
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    assert chosen_engine(None, {}) == "podman"


LISTENER = """#!{python}
import os, socket, sys, time
with open({record!r}, "w") as out:
    print(" ".join(sys.argv[1:]), os.environ.get("USER", "-"), file=out)
sock = socket.socket(socket.AF_UNIX)
sock.bind(sys.argv[-1].removeprefix("unix://"))
sock.listen(1)
time.sleep(60)
"""


def test_podman_hpcs_service_is_its_own_even_where_podmans_answers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, listening: Path
) -> None:
    """podman's socket serves podman's default store, not podman-hpc's: never taken."""
    record = tmp_path / "argv"
    fake = tmp_path / "bin" / "podman-hpc"  # stand-in: serves a socket, records how it was run
    fake.parent.mkdir()
    fake.write_text(LISTENER.format(python=sys.executable, record=str(record)))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CONTAINER_HOST", f"unix://{listening}")
    monkeypatch.setattr(podman_module, "user_socket", lambda: listening)
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.delenv("USER", raising=False)  # as in a batch job: podman-hpc needs one
    url = podman_module._start_private_service("podman-hpc")
    assert url != f"unix://{listening}" and accepts(url.removeprefix("unix://"))
    argv, user = record.read_text().rsplit(" ", 1)
    assert argv == f"system service --time=0 {url}"
    assert user.strip() == getpass.getuser()


def test_no_podman_hpc_on_path_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        UserError, match=r"^--engine podman-hpc: podman-hpc is not on PATH \(it is "
    ):
        podman_module.podman_hpc_engine()


class _Images:
    """docker-py's inspect_image on podman-hpc's store: one image."""

    def __init__(self, ref: str, image_id: str) -> None:
        self.ref, self.image_id = ref, image_id
        self.tagged: list[tuple[str, str, str]] = []

    def tag(self, ref: str, repository: str, tag: str) -> None:
        self.tagged.append((ref, repository, tag))

    def inspect_image(self, ref: str) -> dict[str, str]:
        if ref != self.ref:
            import docker.errors

            raise docker.errors.ImageNotFound(ref)
        return {"Id": self.image_id}


@pytest.fixture
def podman_hpc_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The podman-hpc STAND-IN on PATH with its state in tmp_path."""
    state = tmp_path / "podman-hpc"
    monkeypatch.setenv("PODMAN_HPC_STANDIN_STATE", str(state))
    monkeypatch.setenv("PATH", f"{STANDINS}:{os.environ['PATH']}")
    return state


def _seed(state: Path, local: dict[str, str]) -> None:
    state.mkdir(exist_ok=True)
    (state / "state.json").write_text(json.dumps({"local": local, "squashed": {}}))


def test_a_built_image_is_migrated_and_found_squashed_as_built(podman_hpc_store: Path) -> None:
    image_id = "ab" * 32
    _seed(podman_hpc_store, {"localhost/x:1": image_id})  # as the tag above names it
    images = _Images("x:1", f"sha256:{image_id}")
    engine = podman_module.PodmanHpcEngine(images)
    said = engine.make_runnable("x:1")
    # named as built first: podman finds x:1 as reg:5000/x:1 too, podman-hpc's migrate does not
    assert images.tagged == [(f"sha256:{image_id}", "localhost/x", "1")]
    assert said == (
        "x:1 is in podman-hpc's squashed store as localhost/x:1, where `podman-hpc run` finds it"
    )
    calls = (podman_hpc_store / "calls.log").read_text()
    assert "podman-hpc migrate localhost/x:1" in calls


def test_a_migration_that_left_another_image_is_one_line(podman_hpc_store: Path) -> None:
    # podman-hpc logs a failed migration and exits 0: the store shows the old image still
    _seed(podman_hpc_store, {"localhost/x:1": "cd" * 32})
    engine = podman_module.PodmanHpcEngine(_Images("x:1", "sha256:" + "ab" * 32))
    with pytest.raises(StepFailed) as info:
        engine.make_runnable("x:1")
    assert str(info.value) == (
        "podman-hpc migrate localhost/x:1 finished but the squashed store does not hold "
        "localhost/x:1 as abababababab (it holds cdcdcdcdcdcd under that name); "
        "`podman-hpc --log-level debug migrate localhost/x:1` says why"
    )


def test_migrating_an_image_not_in_the_store_is_one_line(podman_hpc_store: Path) -> None:
    engine = podman_module.PodmanHpcEngine(_Images("x:1", "sha256:1"))
    with pytest.raises(UserError, match=r"^y:2: no such image in podman-hpc's store"):
        engine.make_runnable("y:2")
