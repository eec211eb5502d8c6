"""`convert --to sif --engine apptainer`: the composed command run against the labelled
Apptainer stand-in (tests/e2e/standins/apptainer, which checks the documented grammar and
cleans its build-temp dir on SIGINT/SIGTERM as Apptainer's build does)."""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hvd_container.containers.convert import sif_apptainer, sif_native

from hvd_container.core.errors import StepFailed, Terminated, UserError

STANDIN = Path(__file__).resolve().parents[3] / "e2e" / "standins" / "apptainer"
GB = 10**9


@pytest.fixture
def umask() -> Iterator[int]:
    old = os.umask(0o027)
    yield 0o027
    os.umask(old)


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "apptainer") -> Path:
    """PATH with only the stand-in (named apptainer or singularity); returns its call log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / name).symlink_to(STANDIN)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.path.dirname(os.__file__)}:/usr/bin:/bin")
    for var in ("APPTAINER_TMPDIR", "SINGULARITY_TMPDIR", "TMPDIR"):
        monkeypatch.delenv(var, raising=False)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("APPTAINER_STANDIN_LOG", str(log))
    return log


def calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_build_line() -> None:
    uri = sif_apptainer.source_uri("reg:5000/a/b", None)
    assert uri == "docker-daemon://reg:5000/a/b:latest"  # docker-daemon: needs the tag
    assert sif_apptainer.source_uri("x:1", Path("/d/x.tar")) == "docker-archive:///d/x.tar"
    assert sif_apptainer.build_argv("apptainer", Path("o.sif"), uri) == [
        "apptainer", "build", "--force", "o.sif", uri
    ]  # fmt: skip
    assert sif_apptainer.build_env("/opt/bin/singularity", Path("/t"), {"A": "1"}) == {
        "A": "1", "SINGULARITY_TMPDIR": "/t"
    }  # fmt: skip


def test_docker_daemon_build_as_composed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: int
) -> None:
    log = install(tmp_path, monkeypatch)
    monkeypatch.setattr(sif_apptainer, "_image_size", lambda image: 1000)
    target = tmp_path / "out" / "cpu.sif"
    target.parent.mkdir()
    steps: list[str] = []
    sif_apptainer.convert_with_apptainer("hvd/cpu", target, on_step=steps.append)
    (call,) = calls(log)
    argv = call["argv"]
    assert isinstance(argv, list)
    assert argv[:3] == ["apptainer", "build", "--force"]
    assert Path(argv[3]).parent == target.parent and argv[3] != str(target)  # temp name
    assert argv[4] == "docker-daemon://hvd/cpu:latest"
    assert steps == [f"running {tmp_path}/bin/apptainer build --force {argv[3]} {argv[4]}"]
    assert target.read_bytes().startswith(b"#!/usr/bin/env run-singularity\n")
    # A SIF's mode as Apptainer creates it (0755 under the umask), not mkstemp's 0600.
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 & ~umask
    assert os.listdir(target.parent) == ["cpu.sif"]


def test_archive_build_failure_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = install(tmp_path, monkeypatch)
    archive = tmp_path / "img.tar"
    archive.write_bytes(b"x" * 100)
    monkeypatch.setenv("APPTAINER_STANDIN_FAIL", "1")
    target = tmp_path / "out.sif"
    with pytest.raises(StepFailed, match=r"^apptainer build failed \(exit 255\)$"):
        sif_apptainer.convert_with_apptainer("x:1", target, archive=archive)
    assert calls(log)[0]["argv"][4] == f"docker-archive://{archive}"  # type: ignore[index]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "calls.jsonl", "img.tar"]


@pytest.mark.parametrize(
    ("tool", "variable"),
    [
        ("apptainer", "APPTAINER_TMPDIR"),
        ("apptainer", "SINGULARITY_TMPDIR"),  # Apptainer falls back to SINGULARITY_*
        ("singularity", "SINGULARITY_TMPDIR"),
    ],
)
def test_users_tmpdir_is_used_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str, variable: str
) -> None:
    log = install(tmp_path, monkeypatch, tool)
    chosen = tmp_path / "scratch"
    chosen.mkdir()
    monkeypatch.setenv(variable, str(chosen))
    # Even when another candidate has far more room, the user's choice stands.
    free = {chosen: 5 * GB}
    monkeypatch.setattr(sif_apptainer, "_free", lambda p: free.get(Path(p), 500 * GB))
    archive = tmp_path / "img.tar"
    archive.write_bytes(b"x" * 1000)
    sif_apptainer.convert_with_apptainer("x:1", tmp_path / "o.sif", archive=archive)
    assert calls(log)[0]["tmpdir"] == str(chosen)


def test_users_tmpdir_missing_or_small_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = install(tmp_path, monkeypatch)
    archive = tmp_path / "img.tar"
    archive.write_bytes(b"x" * 1000)
    monkeypatch.setenv("APPTAINER_TMPDIR", str(tmp_path / "nope"))
    with pytest.raises(UserError, match=rf"^APPTAINER_TMPDIR={tmp_path}/nope: no such directory$"):
        sif_apptainer.convert_with_apptainer("x:1", tmp_path / "o.sif", archive=archive)
    monkeypatch.setenv("APPTAINER_TMPDIR", str(tmp_path))
    monkeypatch.setattr(sif_apptainer, "_free", lambda p: 1000)
    with pytest.raises(UserError, match=rf"^APPTAINER_TMPDIR={tmp_path}: Apptainer needs about"):
        sif_apptainer.convert_with_apptainer("x:1", tmp_path / "o.sif", archive=archive)
    assert not log.exists()  # the tool never ran
    assert not (tmp_path / "o.sif").exists()


def test_without_a_users_tmpdir_the_roomiest_candidate_is_picked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    small.mkdir()
    big.mkdir()
    monkeypatch.setattr(sif_apptainer, "_free", lambda p: {small: 1, big: 9}.get(Path(p), 0))
    env = {"TMPDIR": str(small)}
    assert sif_apptainer.choose_tmpdir("apptainer", big / "x.sif", env, 5) == big
    with pytest.raises(UserError, match=r"set APPTAINER_TMPDIR to choose another"):
        sif_apptainer.choose_tmpdir("apptainer", big / "x.sif", env, 10)


@pytest.mark.parametrize("bad", ["dir", "missing/x.sif"])
def test_bad_output_gives_the_native_paths_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    install(tmp_path, monkeypatch)
    (tmp_path / "dir").mkdir()
    target = tmp_path / bad
    with pytest.raises(UserError) as apptainer_error:
        sif_apptainer.convert_with_apptainer("x:1", target, archive=tmp_path / "none.tar")
    with pytest.raises(UserError) as native_error:
        sif_native.convert_image_to_sif("x:1", target)
    assert str(apptainer_error.value) == str(native_error.value)
    assert str(apptainer_error.value).startswith(f"--output {target}: ")
    assert "\n" not in str(apptainer_error.value)


def test_missing_tool_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="neither apptainer nor singularity"):
        sif_apptainer.find_tool(path="/nonexistent")


def wait_for_build_temp(log: Path, timeout: float = 20.0) -> dict[str, object]:
    """The stand-in's {"build_temp", "pid"} entry, once its signal handler is in place."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists():
            for entry in calls(log):
                if "build_temp" in entry:
                    return entry
        time.sleep(0.02)
    raise AssertionError("the stand-in never started its build")


def interrupt_when_building(log: Path, signum: int) -> threading.Thread:
    """Send signum to this process (not to its group) once the build holds its temp dir."""

    def send() -> None:
        wait_for_build_temp(log)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def cli_sigterm() -> Iterator[None]:
    """SIGTERM handled as the CLI's main() does: raise Terminated (a KeyboardInterrupt)."""

    def raise_terminated(_signum: int, _frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    yield
    signal.signal(signal.SIGTERM, previous)


def hanging_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path, Path]:
    """The stand-in installed to hang 60 s in its build: (its log, APPTAINER_TMPDIR, the image
    archive, the output directory)."""
    log = install(tmp_path, monkeypatch)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("APPTAINER_TMPDIR", str(scratch))
    monkeypatch.setenv("APPTAINER_STANDIN_HANG", "60")
    archive = tmp_path / "img.tar"
    archive.write_bytes(b"x" * 100)
    out = tmp_path / "out"
    out.mkdir()
    return log, scratch, archive, out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_is_passed_on_so_apptainer_cleans_its_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_sigterm: None, signum: int
) -> None:
    log, scratch, archive, out = hanging_build(tmp_path, monkeypatch)
    sender = interrupt_when_building(log, signum)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt) as exc:
        sif_apptainer.convert_with_apptainer("x:1", out / "x.sif", archive=archive)
    sender.join()
    assert isinstance(exc.value, Terminated) == (signum == signal.SIGTERM)
    assert time.monotonic() - started < 30  # it did not sit out the stand-in's 60 s
    # The stand-in got the very signal (we sent it to our pid only) and removed its temp dir.
    building = wait_for_build_temp(log)
    assert calls(log)[-1] == {
        "signal": signal.Signals(signum).name,
        "removed": building["build_temp"],
    }
    assert os.listdir(scratch) == []
    assert os.listdir(out) == []  # the .part target is gone too


def test_a_tool_that_ignores_the_signal_is_killed_after_the_grace_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APPTAINER_STANDIN_IGNORE_SIGNALS", "1")
    log, scratch, archive, out = hanging_build(tmp_path, monkeypatch)
    sender = interrupt_when_building(log, signal.SIGINT)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sif_apptainer.convert_with_apptainer("x:1", out / "x.sif", archive=archive, grace=0.5)
    sender.join()
    assert 0.5 <= time.monotonic() - started < 30
    pid = wait_for_build_temp(log)["pid"]
    assert isinstance(pid, int)
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pid, 0)
    assert "signal" not in calls(log)[-1]  # it never reacted: its temp dir stays (SIGKILL)
    assert len(os.listdir(scratch)) == 1
    assert os.listdir(out) == []
