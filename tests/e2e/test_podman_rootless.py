"""The second build engine for real: podman, rootless, as a login node's user runs it.

An unprivileged user (testbed/podman-rootless.sh: subordinate ids, overlay storage, no root,
no access to the Docker socket) installs hvd-container from its wheel and builds
cpu-bookworm-torch with `--engine podman`: podman's Docker-compatible API service is started
for the command and stopped after it, buildah's steps come out as the same progress, the image
is verified, a failing step gives the same one line, and `convert --to sif` (engine `auto`:
Docker does not answer this user) writes the SIF that then trains DDP on the local cluster's
two nodes. The Horovod recipe, cpu-bookworm, goes the same way under `make test-heavy`."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._json_records import records
from tests.e2e.sif_fixtures import ROOT, run_testbed
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    job_dir,
    slurm_cluster,
)
from tests.e2e.test_run_torch import EXAMPLES, check_torch_training
from tests.e2e.test_run_training import _check_training as check_horovod_training
from tests.e2e.test_run_training import _train as train_horovod

# a cold build in the unprivileged user's own store: about 6 minutes of a cold .ci/run's 2
# cores, so `make test-heavy` (-m heavy)
pytestmark = [pytest.mark.e2e, pytest.mark.heavy]

USER = "hvdbuild"
RECIPE = "cpu-bookworm-torch"
# the user's own files: its venv, recipes and SIFs (kept between sessions: the venv's packages)
HOME = Path(os.environ.get("HVD_E2E_CACHE", "/var/tmp/hvd-e2e")) / "rootless"


# this machine's pip settings (an index, find-links, a proxy) live in the environment: the user
# gets them as a login node's user has their own pip configuration
PASSED = ("PIP_", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


def as_user(*argv: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """argv as the unprivileged user, in a login shell of its own: none of root's environment
    but its pip and proxy settings."""
    settings = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(PASSED)]
    line = f"cd {shlex.quote(str(HOME))} && exec {shlex.join(['env', *settings, *argv])}"
    return subprocess.run(
        ["su", "-", USER, "-c", line], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def rootless(base_image: str) -> Path:
    """The user, its podman with the Debian base, and hvd-container in a venv of its own."""
    run_testbed("podman-rootless.sh", "up")
    run_testbed("podman-rootless.sh", "load-base", "bookworm")
    wheels = HOME / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    wheels.mkdir(parents=True)
    source = HOME / "source"  # the checkout's files (pip would write build/ into the checkout)
    shutil.rmtree(source, ignore_errors=True)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
        check=True, capture_output=True,
    )  # fmt: skip
    shutil.rmtree(source)
    shutil.chown(HOME, USER, USER)
    for path in [wheels, *wheels.iterdir()]:
        shutil.chown(path, USER, USER)
    (wheel,) = wheels.glob("*.whl")
    venv = HOME / "venv"
    if not (venv / "bin" / "python").exists():
        made = as_user("/usr/bin/python3", "-m", "venv", str(venv))
        assert made.returncode == 0, made.stderr
    for args in (["--force-reinstall", "--no-deps", str(wheel)], [f"{wheel}[build]"]):
        installed = as_user(str(venv / "bin" / "pip"), "install", "-q", *args)
        assert installed.returncode == 0, installed.stderr
    return venv / "bin" / "hvd-container"


@pytest.fixture(scope="module")
def built(rootless: Path) -> list[dict]:
    """`build --engine podman` as the user: its JSON progress records."""
    # an earlier session's image would be up to date, built without a step: drop its name
    # (its layers stay in the cache, so the steps run again, cached)
    as_user("podman", "untag", f"{RECIPE}:1", f"docker.io/library/{RECIPE}:1")  # its API's name
    # and the images earlier runs left without a name (~2 GB each run otherwise)
    as_user("podman", "image", "prune", "--force")
    proc = as_user(str(rootless), "build", RECIPE, "--engine", "podman", "--progress", "json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    return records(proc.stdout)


def test_the_user_has_no_root_and_no_docker(rootless: Path) -> None:
    who = as_user("id", "-u")
    assert who.stdout.strip() != "0"
    docker = as_user(str(rootless.parent / "python"), "-c", DOCKER_PING)
    assert docker.returncode != 0  # the Docker socket refuses this user
    assert "Permission denied" in docker.stderr or "No such file" in docker.stderr


DOCKER_PING = "import socket; s = socket.socket(socket.AF_UNIX); s.connect('/var/run/docker.sock')"


def test_rootless_build_reports_buildahs_steps_and_verifies(built: list[dict]) -> None:
    steps = [r for r in built if r["event"] == "step"]
    assert steps, built[-5:]
    # buildah's `STEP n/m:` lines are steps with their phases, as the classic builder's are
    assert {r["phase"] for r in steps} >= {"base", "frameworks", "checks"}
    assert any(r["text"].startswith("[1/") and "FROM hvd-base/debian:bookworm" in r["text"]
               for r in steps)  # fmt: skip
    (result,) = [r for r in built if r.get("event") == "result"]
    assert result["tag"] == f"{RECIPE}:1"
    assert result["labels"]["org.hvd-container.verified"] == "true"


def test_the_image_is_in_the_users_store(built: list[dict]) -> None:
    (result,) = [r for r in built if r.get("event") == "result"]
    listed = as_user("podman", "image", "inspect", "--format", "{{.Id}}", f"{RECIPE}:1")
    assert listed.returncode == 0, listed.stderr
    assert result["image_id"].removeprefix("sha256:") == listed.stdout.strip()
    # the private API service stopped with the command
    assert as_user("pgrep", "-u", USER, "-f", "podman system service").returncode == 1


def test_a_failing_step_is_one_line_under_podman(rootless: Path, built: list[dict]) -> None:
    marker = "no_such_module_rootless"
    recipe = HOME / "broken.yaml"
    recipe.write_text(
        f"extends: {RECIPE}\nname: hvd-test-broken-rootless\nchecks:\n"
        f"  - python -c 'import {marker}'\n"
    )
    shutil.copy(ROOT / "recipes" / f"{RECIPE}.lock", recipe.with_suffix(".lock"))
    for path in (recipe, recipe.with_suffix(".lock")):
        shutil.chown(path, USER, USER)
    proc = as_user(str(rootless), "build", str(recipe), "--engine", "podman", "--progress", "plain")
    assert proc.returncode == 1, proc.stdout[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("hvd-container: error: build failed at step "), proc.stderr
    assert f"`RUN python -c 'import {marker}'`" in last
    assert f"No module named '{marker}'" in proc.stderr  # the step's output tail
    gone = as_user("podman", "image", "exists", "hvd-test-broken-rootless:1")
    assert gone.returncode == 1


@pytest.fixture(scope="module")
def rootless_sif(rootless: Path, built: list[dict]) -> Path:
    sif = HOME / "torch.sif"
    sif.unlink(missing_ok=True)
    # no --engine and no $HVD_ENGINE: auto finds that Docker refuses this user, takes podman
    proc = as_user(str(rootless), "convert", f"{RECIPE}:1", "--to", "sif", "-o", str(sif))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert f"wrote {sif}" in proc.stdout + proc.stderr
    return sif


def test_the_rootless_sif_trains_ddp_on_two_nodes(
    rootless_sif: Path,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    inspected = cli("inspect", str(rootless_sif), "--json")
    assert inspected.returncode == 0, inspected.stderr
    labels = json.loads(inspected.stdout.strip().splitlines()[-1])
    assert "cpu-bookworm-torch" in json.dumps(labels)
    checkpoint = job_dir / "rootless" / "model.pt"
    result = cli(
        "run", "--site", "local", "--image", str(rootless_sif), "--controller", "torch",
        "-N", "2", "--ntasks-per-node", "1", str(ROOT / "examples" / EXAMPLES["ddp"]),
        "--epochs", "3", "--checkpoint", str(checkpoint), cwd=job_dir, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    check_torch_training(result.stdout, "DDP", checkpoint, epochs=3)


HOROVOD_RECIPE = "cpu-bookworm"


@pytest.mark.heavy
def test_the_horovod_recipe_built_rootless_trains_over_mpi_on_two_nodes(
    rootless: Path,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """cpu-bookworm, Horovod compiled against Debian's Open MPI, built by the unprivileged
    user with --engine podman, verified, converted to a SIF and trained over MPI on the local
    cluster's two nodes. Heavy (`make test-heavy`): Horovod compiles for minutes under
    buildah, past what .ci/run has left."""
    as_user("podman", "untag", f"{HOROVOD_RECIPE}:1", f"docker.io/library/{HOROVOD_RECIPE}:1")
    proc = as_user(
        str(rootless), "build", HOROVOD_RECIPE, "--engine", "podman", "--progress", "json",
        timeout=3600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    (result,) = [r for r in records(proc.stdout) if r.get("event") == "result"]
    labels = result["labels"]
    assert labels["org.hvd-container.verified"] == "true"
    assert labels["org.hvd-container.horovod.controllers"] == "gloo,mpi"
    sif = HOME / "horovod.sif"
    sif.unlink(missing_ok=True)
    converted = as_user(
        str(rootless), "convert", f"{HOROVOD_RECIPE}:1", "--to", "sif", "-o", str(sif)
    )
    assert converted.returncode == 0, converted.stdout[-2000:] + converted.stderr
    checkpoint = job_dir / "rootless-horovod" / "model.pt"
    trained = train_horovod(checkpoint=checkpoint, image=sif, cwd=job_dir)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    check_horovod_training(trained.stdout, "mpi", checkpoint)
