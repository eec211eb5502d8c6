"""Command lines for Apptainer, Shifter's gateway and podman-hpc, and reading their output."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from containers.convert import podman_hpc, shifter, sif_apptainer
from containers.convert.site_images import remote_name
from containers.convert.source import default_output
from hvd_container.errors import StepFailed, UserError


def test_apptainer_build_line_and_tmpdir(tmp_path: Path) -> None:
    argv = sif_apptainer.build_argv(
        "/usr/bin/apptainer", tmp_path / "x.sif", sif_apptainer.source_uri("cpu", None)
    )
    assert argv == ["/usr/bin/apptainer", "build", "--force", str(tmp_path / "x.sif"),
                    "docker-daemon://cpu:latest"]  # fmt: skip
    assert "sudo" not in argv
    assert sif_apptainer.source_uri("reg:5000/a/b", None) == "docker-daemon://reg:5000/a/b:latest"
    assert sif_apptainer.source_uri("x:1", Path("/d/x.tar")) == "docker-archive:///d/x.tar"
    env = sif_apptainer.build_env("/usr/bin/apptainer", tmp_path, {"A": "1"})
    assert env == {"A": "1", "APPTAINER_TMPDIR": str(tmp_path)}
    assert "SINGULARITY_TMPDIR" in sif_apptainer.build_env("singularity", tmp_path, {})


def test_apptainer_tmpdir_needs_room(tmp_path: Path) -> None:
    assert sif_apptainer.pick_tmpdir([tmp_path, tmp_path / "missing"], 1) == tmp_path
    with pytest.raises(UserError, match="APPTAINER_TMPDIR"):
        sif_apptainer.pick_tmpdir([tmp_path], 1 << 60)


def test_apptainer_missing_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="neither apptainer nor singularity"):
        sif_apptainer.find_tool(path="/nonexistent")


@pytest.mark.parametrize("rc", [0, 255])
def test_apptainer_build_is_atomic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rc: int
) -> None:
    tool = tmp_path / "bin" / "apptainer"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tool.parent))
    archive = tmp_path / "img.tar"
    archive.write_bytes(b"x" * 100)
    seen: list[list[str]] = []

    def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        seen.append(argv)
        assert env["APPTAINER_TMPDIR"]
        Path(argv[3]).write_bytes(b"SIF")
        return subprocess.CompletedProcess(argv, rc)

    target = tmp_path / "out.sif"
    if rc:
        with pytest.raises(StepFailed, match="exit 255"):
            sif_apptainer.convert_with_apptainer("x:1", target, archive=archive, run=run)
        assert not target.exists()
    else:
        sif_apptainer.convert_with_apptainer("x:1", target, archive=archive, run=run)
        assert target.read_bytes() == b"SIF"
    assert seen[0][:3] == [str(tool), "build", "--force"]
    assert seen[0][4] == f"docker-archive://{archive}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["bin", "img.tar"] + (["out.sif"] if not rc else [])
    )


@pytest.mark.parametrize(
    ("image", "ref"),
    [
        ("docker.io/library/ubuntu", "docker:ubuntu:latest"),
        ("docker.io/me/cpu:1", "docker:me/cpu:1"),
        ("registry.nersc.gov/proj/cpu:1", "docker:registry.nersc.gov/proj/cpu:1"),
        ("127.0.0.1:5000/cpu", "docker:127.0.0.1:5000/cpu:latest"),
        ("docker:me/x:2", "docker:me/x:2"),
    ],
)
def test_shifter_reference(image: str, ref: str) -> None:
    assert shifter.shifter_image_ref(image) == ref


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
    assert remote_name(image, "127.0.0.1:5000/") == remote


@pytest.mark.parametrize(
    ("image", "name"),
    [("cpu:1", "cpu_1.sif"), ("reg:5000/a/cpu", "cpu_latest.sif"), ("a/b:1@sha256:00", "b_1.sif")],
)
def test_default_sif_name(image: str, name: str) -> None:
    assert default_output(image, ".sif") == Path(name)
