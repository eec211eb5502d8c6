"""Failures give one clear line and leave nothing half-made: a failing step, an interrupted
build, a refused push, a registry that stops in the middle of a push, a Docker engine that
restarts in the middle of a build. (A missing daemon needs no engine: tests/unit/cli/test_build_cli_errors.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from build_fixtures import CPU_RECIPE, ROOT, hvd, reaped, started, with_cpu_lock

pytestmark = pytest.mark.e2e

ALLOWED = (
    " (a host name or address, and lower-case path components of letters and digits "
    "joined by '.', '_', '__' or '-')"
)


def child_recipe(tmp_path: Path, name: str, checks: list[str]) -> Path:
    lines = [f"extends: {CPU_RECIPE}", f"name: {name}", "checks:"]
    lines += [f"  - {c}" for c in checks]
    path = tmp_path / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return with_cpu_lock(path)


def containers_running(api: Any, marker: str) -> list[str]:
    """Containers (any state) whose command mentions marker: leftovers of a build step."""
    found = []
    for c in api.containers(all=True):
        if marker in (c.get("Command") or ""):
            found.append(c["Id"])
    return found


def image_exists(api: Any, ref: str) -> bool:
    import docker.errors

    try:
        api.inspect_image(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def test_failing_step_stops_with_instruction_and_output(
    api: Any, cpu_image: str, tmp_path: Path
) -> None:
    marker = "no_such_module_hvd_e2e"
    recipe = child_recipe(tmp_path, "hvd-test-broken", [f"python -c 'import {marker}'"])
    proc = hvd("build", str(recipe), "--progress", "plain")
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("hvd-container: error: build failed at step ")
    assert f"`RUN python -c 'import {marker}'`" in last
    assert "returned a non-zero code: 1" in last
    assert f"ModuleNotFoundError: No module named '{marker}'" in proc.stderr  # the output tail
    assert "[checks] =>" in proc.stdout  # progress lines carry their phase
    assert not image_exists(api, "hvd-test-broken:1")
    assert containers_running(api, marker) == []


def test_interrupted_build_leaves_no_containers(api: Any, cpu_image: str, tmp_path: Path) -> None:
    # a step no earlier build can have cached (a cached step would not start a container)
    marker = f"sleep 417 && echo {uuid.uuid4().hex[:12]}"
    recipe = child_recipe(tmp_path, "hvd-test-interrupt", [marker])
    proc = subprocess.Popen(
        [sys.executable, "-m", "hvd_container", "build", str(recipe), "--progress", "plain"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    try:
        deadline = time.monotonic() + 300
        for line in proc.stdout:
            if f"RUN {marker}" in line:
                break
            assert time.monotonic() < deadline
        time.sleep(3)  # the step's container is running now
        assert containers_running(api, marker)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a failed assertion must not leave the build running
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == "hvd-container: interrupted"
    for _ in range(40):  # the daemon cancels the step when the client goes away
        if not containers_running(api, marker):
            break
        time.sleep(0.5)
    assert containers_running(api, marker) == []
    assert not image_exists(api, "hvd-test-interrupt:1")


def test_refused_push_is_one_line_and_leaves_no_tag(api: Any, cpu_image: str) -> None:
    registry = "127.0.0.1:5999"  # nothing listens here
    proc = hvd("push", cpu_image, "--registry", registry)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"hvd-container: error: push of {registry}/{cpu_image} refused: "
    )
    assert not image_exists(api, f"{registry}/{cpu_image}")


def test_bad_registry_flag(tmp_path: Path) -> None:
    # Checked before the engine is contacted: the same line even with no daemon at all.
    for env in ({}, {"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}):
        proc = hvd("push", "cpu-bookworm:1", "--registry", " ", env=env)
        assert proc.returncode == 2
        assert proc.stderr.splitlines() == [
            "hvd-container: error: --registry ' ': expected HOST[:PORT][/NAMESPACE]" + ALLOWED
        ]


def test_a_missing_base_image_says_how_to_get_it(
    docker_engine: str, local_registry: str, tmp_path: Path
) -> None:
    # a base the registry does not have, as a deleted CUDA tag would be
    base = f"{local_registry}/hvd-test/no-such-base:{uuid.uuid4().hex[:8]}"
    recipe = tmp_path / "nobase.yaml"
    recipe.write_text(
        f'name: nobase\nversion: "1"\nbase: {base}\npython:\n  version: "3.11"\n  source: image\n'
    )
    proc = hvd("build", str(recipe), "--progress", "plain", "--no-verify")
    assert proc.returncode == 1
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("hvd-container: error:")]
    assert line.startswith(f"hvd-container: error: base image {base} cannot be pulled (")
    assert "set base.image to a newer tag" in line and f"`docker pull {base}`" in line


def test_a_dockerd_restart_mid_build_is_one_line_naming_the_fix(
    api: Any, cpu_image: str, tmp_path: Path
) -> None:
    marker = f"sleep 419 && echo {uuid.uuid4().hex[:12]}"  # a step no cache can hold
    recipe = child_recipe(tmp_path, "hvd-test-restart", [marker])
    with reaped(started("build", str(recipe), "--progress", "plain")) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if f"RUN {marker}" in line:
                break
        time.sleep(3)  # the step's container is running now
        for action in ("down", "up"):
            done = subprocess.run(["sh", str(ROOT / "testbed" / "docker.sh"), action],
                                  capture_output=True, text=True)  # fmt: skip
            assert done.returncode == 0, done.stderr
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hvd-container: error: build failed at step "), err
    assert lines[0].endswith(
        "the Docker engine restarted during this step: run the same build again; the steps "
        "that finished come from its cache"
    ), err
    assert not image_exists(api, "hvd-test-restart:1")


def test_a_registry_that_stops_mid_push_is_one_line_and_the_next_push_completes(
    api: Any, base_image: str, local_registry: str, tmp_path: Path
) -> None:
    """The registry goes away while a layer is on its way; once it is back, the same push
    completes and the registry serves the digest."""
    seed = uuid.uuid4().hex  # a layer the registry cannot have yet
    (tmp_path / "Dockerfile").write_text(
        f"FROM {base_image}\nRUN head -c 160M /dev/urandom > /blob && echo {seed} > /seed\n"
    )
    tag = f"hvd-test/push-stop:{seed[:8]}"
    for _ in api.build(path=str(tmp_path), tag=tag, rm=True, decode=True):
        pass
    registry = ROOT / "testbed" / "registry.sh"
    try:
        push = started("push", tag, "--registry", local_registry, "--progress", "plain")
        with reaped(push) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if " of " in line and "MB" in line:  # bytes are going out
                    break
            stopped = subprocess.run(["sh", str(registry), "down"], capture_output=True)
            assert stopped.returncode == 0
            _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"hvd-container: error: push of {local_registry}/{tag} "
        ), err
        subprocess.run(["sh", str(registry), "up"], capture_output=True, check=True)
        again = hvd("push", tag, "--registry", local_registry, "--progress", "plain")
        assert again.returncode == 0, again.stderr
        assert f"pushed {local_registry}/{tag} (sha256:" in again.stdout
    finally:
        subprocess.run(["sh", str(registry), "up"], capture_output=True)
        for ref in (tag, f"{local_registry}/{tag}"):
            if image_exists(api, ref):
                api.remove_image(ref)
