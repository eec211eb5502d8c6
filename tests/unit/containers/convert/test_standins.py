"""The STAND-INS for shifterimg and podman-hpc (tests/e2e/standins/) behave as their sources do,
and the product's parsers read what they print. No registry is needed: a reference on a port
that refuses connections is one the registry does not have."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hvd_container.containers.convert import podman_hpc, shifter

STANDINS = Path(__file__).resolve().parents[3] / "e2e" / "standins"
NOWHERE = "127.0.0.1:1"  # connection refused: the registry "has no such image"


def run(tool: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The stand-in's output as written (text=True would turn its \r redraws into \n)."""
    raw = subprocess.run(
        [sys.executable, str(STANDINS / tool), *args],
        capture_output=True,
        env={**os.environ, "TZ": "UTC", **env},
        timeout=60,
    )
    return subprocess.CompletedProcess(
        raw.args, raw.returncode, raw.stdout.decode(), raw.stderr.decode()
    )


@pytest.fixture
def shifter_env(tmp_path: Path) -> dict[str, str]:
    return {"SHIFTER_STANDIN_STATE": str(tmp_path / "shifter")}


@pytest.fixture
def podman_env(tmp_path: Path) -> dict[str, str]:
    return {"PODMAN_HPC_STANDIN_STATE": str(tmp_path / "podman")}


def seed(env: dict[str, str], key: str, state: dict[str, object]) -> None:
    directory = Path(env[key])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "state.json").write_text(json.dumps(state))


def test_shifterimg_images_rows_in_the_clients_format(shifter_env: dict[str, str]) -> None:
    seed(shifter_env, "SHIFTER_STANDIN_STATE", {
        "docker:reg/b:2": {"id": "f" * 64, "pulled": 1_700_000_000.5},
        "docker:reg/a:1": {"id": "0123456789abcdef", "pulled": 1_600_000_000},
    })  # fmt: skip
    result = run("shifterimg", "-u", "alice,bob", "-g", "hpc", "images", env=shifter_env)
    assert result.returncode == 0, result.stderr
    # printf("%-10s %-10s %-8s %-.10s   %s %-30s\n", system, type, status, id, time, tag)
    assert result.stdout.splitlines() == [
        "local      docker     READY    0123456789   2020-09-13T12:26:40 reg/a:1" + " " * 23,
        "local      docker     READY    ffffffffff   2023-11-14T22:13:20 reg/b:2" + " " * 23,
    ]


def test_shifterimg_pull_of_a_missing_image_reports_failure_and_exits_0(
    shifter_env: dict[str, str],
) -> None:
    result = run("shifterimg", "-v", "pull", f"docker:{NOWHERE}/x", env=shifter_env)
    assert result.returncode == 0  # as the real client: the status says it
    assert f"Pulling Image: docker:{NOWHERE}/x:latest, status: FAILURE\n" in result.stdout
    assert shifter.statuses(result.stdout) == ["PENDING", "PULLING", "FAILURE"]
    assert result.stdout.count("Message: ") == 3  # -v shows each gateway answer
    quiet = run("shifterimg", "pull", f"docker:{NOWHERE}/x:1", env=shifter_env)
    assert quiet.stdout.startswith("\r\x1b[2K") and quiet.stdout.endswith("status: FAILURE\n")
    assert shifter.follow_pull([quiet.stdout]) == "FAILURE"
    lookup = run("shifterimg", "lookup", f"docker:{NOWHERE}/x:1", env=shifter_env)
    assert (lookup.returncode, lookup.stdout) == (1, "")


def test_shifterimg_client_stops_polling_at_hashing(shifter_env: dict[str, str]) -> None:
    env = {**shifter_env, "SHIFTER_STANDIN_STATUSES": "PENDING,PULLING,HASHING,READY"}
    result = run("shifterimg", "pull", f"docker:{NOWHERE}/x:1", env=env)
    assert shifter.statuses(result.stdout) == ["PENDING", "PULLING", "HASHING"]
    assert result.stdout.endswith("status: HASHING\n")


def test_shifterimg_options_only_before_the_mode(shifter_env: dict[str, str]) -> None:
    result = run("shifterimg", "pull", "-v", "docker:x:1", env=shifter_env)
    assert result.returncode == 1  # "-v" is taken as the image descriptor
    assert result.stderr.startswith("FAILED to parse image descriptor")
    missing = run("shifterimg", "-u", env=shifter_env)
    assert (missing.returncode, missing.stderr) == (1, "Missing an argument!\n")
    down = run(
        "shifterimg", "lookup", "docker:x:1", env={**shifter_env, "SHIFTER_STANDIN_DOWN": "1"}
    )
    assert (down.returncode, down.stdout) == (1, "ERROR: failed to contact the image gateway.\n")


@pytest.mark.parametrize(("pre_1_0_2", "code"), [(False, 125), (True, 0)])
def test_podman_hpc_pull_failed(podman_env: dict[str, str], pre_1_0_2: bool, code: int) -> None:
    env = {**podman_env, "PODMAN_HPC_STANDIN_PRE_1_0_2": "1" if pre_1_0_2 else "0"}
    result = run("podman-hpc", "pull", f"{NOWHERE}/x:1", env=env)
    assert result.returncode == code
    assert result.stderr.splitlines()[-1] == "Pull failed."


def test_podman_hpc_remigrate_rmsqi_and_normalised_names(podman_env: dict[str, str]) -> None:
    # A short name as podman stores it after a pull: fully qualified.
    seed(podman_env, "PODMAN_HPC_STANDIN_STATE",
         {"local": {"docker.io/library/x:1": "id1"}, "squashed": {}})  # fmt: skip
    listing = ["images", "--format", "{{.Repository}}:{{.Tag}} {{.ReadOnly}}"]
    assert not podman_hpc.squashed(run("podman-hpc", *listing, env=podman_env).stdout, "x:1")
    for _ in range(2):  # the second migrate is "Previously migrated": a no-op, exit 0
        assert run("podman-hpc", "migrate", "x:1", env=podman_env).returncode == 0
    images = run("podman-hpc", *listing, env=podman_env).stdout
    assert images == "docker.io/library/x:1 false\ndocker.io/library/x:1 true\n"
    assert podman_hpc.squashed(images, "x:1")
    assert podman_hpc.squashed(images, "docker.io/library/x:1")
    assert not podman_hpc.squashed(images, "x:2")
    assert run("podman-hpc", "rmsqi", "x:1", env=podman_env).returncode == 0
    assert not podman_hpc.squashed(run("podman-hpc", *listing, env=podman_env).stdout, "x:1")


def test_store_names_follow_podman_hpcs_lookup() -> None:
    assert podman_hpc.store_names("x") == (
        "x:latest", "docker.io/x:latest", "docker.io/library/x:latest", "localhost/x:latest"
    )  # fmt: skip
    assert podman_hpc.store_names("reg:5000/a/b:1")[0] == "reg:5000/a/b:1"
