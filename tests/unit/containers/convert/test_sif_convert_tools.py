"""Command lines for Shifter's gateway and podman-hpc, and reading their output.

(Apptainer's: test_sif_apptainer.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from hvd_container.containers.convert import podman_hpc, shifter
from hvd_container.containers.convert.source import default_output
from hvd_container.containers.push import remote_ref


def test_shifter_commands_local_and_over_ssh() -> None:
    assert shifter.pull_argv("docker:a/b:1") == ["shifterimg", "pull", "docker:a/b:1"]
    assert shifter.lookup_argv("docker:a/b:1", "login1") == [
        "ssh", "-o", "BatchMode=yes", "login1", "shifterimg lookup docker:a/b:1"
    ]  # fmt: skip


PULL_OUTPUT = (
    "2026-11-22T01:00:00 Pulling Image: docker:a/b:1, status: PENDING"
    "\r\x1b[2K2026-11-22T01:00:00 Pulling Image: docker:a/b:1, status: PENDING"
    "\r\x1b[2K2026-11-22T01:00:01 Pulling Image: docker:a/b:1, status: PULLING"
    "\r\x1b[2K2026-11-22T01:00:02 Pulling Image: docker:a/b:1, status: CONVERSION"
    "\r\x1b[2K2026-11-22T01:00:03 Pulling Image: docker:a/b:1, status: {last}\n"
)


@pytest.mark.parametrize("last", ["READY", "FAILURE"])
def test_follow_pull_reports_each_status_once(last: str) -> None:
    text = PULL_OUTPUT.format(last=last)
    seen: list[str] = []
    chunks = [text[i : i + 7] for i in range(0, len(text), 7)]  # split mid-line
    assert shifter.follow_pull(chunks, seen.append) == last
    assert seen == ["PENDING", "PULLING", "CONVERSION", last]


def test_podman_hpc_commands_and_store_listing() -> None:
    assert podman_hpc.podman_image_ref("docker:reg/x:1") == "reg/x:1"
    assert podman_hpc.pull_argv("reg/x:1") == ["podman-hpc", "pull", "reg/x:1"]
    assert podman_hpc.rmsqi_argv("reg/x:1", "l1")[-1] == "podman-hpc rmsqi reg/x:1"
    listing = "reg/x:1 false\nreg/x:1 true\nreg/y:2 false\n"
    assert podman_hpc.squashed(listing, "reg/x:1")
    assert not podman_hpc.squashed(listing, "reg/y:2")


@pytest.mark.parametrize(
    ("image", "remote"),
    [
        ("cpu:1", "127.0.0.1:5000/cpu:1"),
        ("hvd/cpu", "127.0.0.1:5000/hvd/cpu:latest"),
        ("localhost:5000/cpu:1", "127.0.0.1:5000/cpu:1"),
    ],
)
def test_remote_name(image: str, remote: str) -> None:
    assert ":".join(remote_ref(image, "127.0.0.1:5000/")) == remote


@pytest.mark.parametrize(
    ("image", "name"),
    [("cpu:1", "cpu_1.sif"), ("reg:5000/a/cpu", "cpu_latest.sif"), ("a/b:1@sha256:00", "b_1.sif")],
)
def test_default_sif_name(image: str, name: str) -> None:
    assert default_output(image, ".sif") == Path(name)
