"""Job control without a cluster: logs of both streams, Ctrl-C right after sbatch, detach
rules, unreadable logs and a deleted working directory as one-line errors, Jupyter's wait,
and the local image cache under concurrent runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from _fake_slurm import FakeSlurm
from _json_records import result
from _launch_helpers import isolated, write  # noqa: F401
from _shell import job_command
from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.layout import DataObject, sif_prefix
from hvd_container.launcher import slurm
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.run import jupyter
from hvd_container.launcher.runtimes import charliecloud
from hvd_container.launcher.sites import machine
from hvd_container.launcher.sites.loader import load_site
from hvd_container.launcher.slurm import Job

from hvd_container.cli.app import main
from hvd_container.cli.terminal import TerminalReporter
from hvd_container.core.errors import UserError


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def job_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    job = tmp_path / "job"
    job.mkdir()
    monkeypatch.chdir(job)
    monkeypatch.setenv("USER", "alice")
    monkeypatch.setenv("HVD_CONTAINER_CACHE", str(tmp_path / "cache"))
    return job


@pytest.fixture()
def image(tmp_path: Path) -> Path:
    return write(tmp_path / "img" / "etc" / "hostname", "img\n").parent.parent


@pytest.fixture()
def cancelled(monkeypatch: pytest.MonkeyPatch, fake_slurm: FakeSlurm) -> list[str]:
    """The fake Slurm in place and this machine's srun plugins stood in for: the list of the
    job ids it was asked to cancel."""
    monkeypatch.setattr(
        machine.ThisMachine, "srun_mpi_plugins", property(lambda _: ["pmix", "none"])
    )
    return fake_slurm.cancelled


# --- logs -------------------------------------------------------------------------------------


def _job(job_dir: Path, **fields: Any) -> Job:
    values: dict[str, Any] = dict(
        job_id="31", name="train", state="FAILED", exit_status=1, signal=0,
        stdout="train_31.out", stderr="train_31.err", workdir=str(job_dir),
    )  # fmt: skip
    return Job(**{**values, **fields})


def test_logs_prints_stdout_then_stderr(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    fake_slurm: FakeSlurm,
) -> None:
    write(job_dir / "train_31.out", "epoch 1 loss 0.5\n")
    write(job_dir / "train_31.err", "Traceback: boom\n")
    fake_slurm.on_job = lambda job_id: _job(job_dir)
    code, out, err = cli(capsys, "logs", "31")
    assert code == 0, err
    assert out == "epoch 1 loss 0.5\nTraceback: boom\n"


def test_logs_with_one_file_for_both_streams_prints_it_once(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    fake_slurm: FakeSlurm,
) -> None:
    write(job_dir / "train_31.out", "all\n")
    job = _job(job_dir, stderr=str(job_dir / "train_31.out"))
    fake_slurm.on_job = lambda job_id: job
    assert cli(capsys, "logs", "31")[1] == "all\n"


def test_an_unreadable_log_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    fake_slurm: FakeSlurm,
) -> None:
    (job_dir / "train_31.out").mkdir()  # reading it fails with an OSError, even for root
    fake_slurm.on_job = lambda job_id: _job(job_dir)
    code, out, err = cli(capsys, "logs", "31")
    assert code == 2 and out == ""
    assert err.startswith(
        f"hvd-container: error: cannot read the job's log {job_dir}/train_31.out: "
    )
    assert err.count("\n") == 1
    with pytest.raises(UserError, match="cannot read the job's log"):
        slurm.follow("31", Reporter(), poll=0)


def test_logs_follow_sends_the_err_file_to_stderr(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    fake_slurm: FakeSlurm,
) -> None:
    write(job_dir / "train_31.out", "epoch 1 loss 0.5\n")
    write(job_dir / "train_31.err", "Traceback: boom\n")
    fake_slurm.on_job = lambda job_id: _job(job_dir)
    code, out, err = cli(capsys, "logs", "-f", "31")
    assert code == 1
    assert out == "epoch 1 loss 0.5\n"
    assert err == "job 31 FAILED (exit code 1)\nTraceback: boom\n"


def test_follow_keeps_one_file_for_both_streams_on_stdout(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    fake_slurm: FakeSlurm,
) -> None:
    write(job_dir / "train_31.out", "all\n")
    job = _job(job_dir, stderr=str(job_dir / "train_31.out"), state="COMPLETED", exit_status=0)
    fake_slurm.on_job = lambda job_id: job
    assert slurm.follow("31", TerminalReporter(), poll=0).exit_code == 0
    assert capsys.readouterr() == ("all\n", "job 31 COMPLETED (exit code 0)\n")


def test_logs_follow_notices_a_hang_asks_for_stacks_and_cancels(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    cancelled: list[str],
    fake_slurm: FakeSlurm,
) -> None:
    """The job's ranks (stood in for here) answer the watcher's file with their stacks."""
    from hvd_container.launcher.run import hang

    stacks = job_dir / ".hvd-container" / "stacks"
    stacks.mkdir(parents=True)
    for path, text in hang.watcher_files(stacks).items():
        write(Path(path), text)
    write(job_dir / "train_31.out", "step 1\n")

    def job_info(job_id: str) -> Job:
        if (stacks / "ask-31").exists() and not (job_dir / "train_31.err").exists():
            write(job_dir / "train_31.err", "hvd-container stacks: rank 0, pid 9 on n1 (t.py)\n")
        if cancelled:
            return _job(job_dir, state="CANCELLED", exit_status=0, signal=15)
        return _job(job_dir, state="RUNNING", exit_status=None, signal=None)

    fake_slurm.on_job = job_info
    monkeypatch.setattr(hang, "GRACE", 0.5)
    code, out, err = cli(capsys, "logs", "-f", "31", "--hang-after", "1s", "--cancel-on-hang")
    assert code == 124, err
    assert cancelled == ["31"]
    assert out == "step 1\n"
    assert "job 31: no output for 1s (--hang-after 1s): its ranks look stuck" in err
    assert "hvd-container stacks: rank 0, pid 9 on n1 (t.py)\n" in err
    assert "1 Python processes wrote their stacks (above)\nending job 31 (--cancel-on-hang)" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--hang-after", "1m"], "--hang-after and --cancel-on-hang go with -f/--follow"),
        (["-f", "--cancel-on-hang"], "--cancel-on-hang goes with --hang-after DURATION"),
        (["-f", "--hang-after", "5"], "--hang-after: '5' is not a duration (allowed: 90s, "),
    ],
)
def test_logs_hang_options_are_checked(
    capsys: pytest.CaptureFixture[str], job_dir: Path, argv: list[str], said: str
) -> None:
    code, out, err = cli(capsys, "logs", "31", *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"hvd-container: error: {said}"), err
    assert err.count("\n") == 1


# --- detach -----------------------------------------------------------------------------------


def test_detach_with_salloc_is_refused(
    capsys: pytest.CaptureFixture[str], job_dir: Path, image: Path
) -> None:
    code, _, err = cli(capsys, "run", "--site", "local", "--image", str(image), "--salloc",
                       "--detach", "t.py")  # fmt: skip
    assert code == 2
    assert err == (
        "hvd-container: error: --detach and --salloc exclude each other: --salloc runs interactively\n"
    )


def test_detach_inside_an_allocation_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, job_dir: Path, image: Path
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    code, _, err = cli(capsys, "run", "--site", "local", "--image", str(image), "--detach", "t.py")
    assert code == 2
    assert err.startswith("hvd-container: error: --detach: inside an allocation (job 12) ")
    assert err.count("\n") == 1


def test_batch_detach_needs_submit(capsys: pytest.CaptureFixture[str], job_dir: Path) -> None:
    code, out, err = cli(capsys, "batch", "--site", "zih-alpha", "--image", "docker:u/i:1",
                         "--detach", "t.py")  # fmt: skip
    assert code == 2 and out == ""
    assert "--detach goes with --submit" in err


# --- Ctrl-C right after sbatch -----------------------------------------------------------------


def test_ctrl_c_while_sbatch_runs_cancels_the_new_job(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    image: Path,
    cancelled: list[str],
    fake_slurm: FakeSlurm,
) -> None:
    def submit(script: str, argv: list[str]) -> str:
        os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C as sbatch answers
        return "55"

    fake_slurm.on_submit = submit
    code, _, err = cli(capsys, "run", "--site", "local", "--image", str(image), "-n", "1", "t.py")
    assert code == 130
    assert cancelled == ["55"] and fake_slurm.asked == []  # not followed
    assert "job 55 cancelled" in err


def test_ctrl_c_while_following_cancels_the_job(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    image: Path,
    cancelled: list[str],
    fake_slurm: FakeSlurm,
) -> None:
    def job_info(job_id: str) -> Job:  # Ctrl-C while the job is followed
        raise KeyboardInterrupt

    fake_slurm.on_submit = lambda script, argv: "56"
    fake_slurm.on_job = job_info
    code, _, _ = cli(capsys, "run", "--site", "local", "--image", str(image), "-n", "1", "t.py")
    assert code == 130 and cancelled == ["56"]


def test_sbatch_itself_still_takes_ctrl_c_while_hvd_container_holds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # no shell: sh sets its own signals
    status = ["grep", "-E", "^Sig(Blk|Ign|Cgt)", "/proc/self/status"]
    sigint = 1 << (signal.SIGINT - 1)
    before = signal.getsignal(signal.SIGINT)
    with slurm._interrupts_held():
        assert signal.getsignal(signal.SIGINT) is not before
        for umask in (None, 0o077):
            masks = [
                int(line.split()[1], 16) for line in slurm._run(status, umask=umask).splitlines()
            ]
            assert len(masks) == 3 and not any(mask & sigint for mask in masks)  # the default
    assert signal.getsignal(signal.SIGINT) is before


def test_a_ctrl_c_taken_by_another_thread_is_held_too() -> None:
    """A process-wide signal may land on any thread that does not block it (the runner of
    these tests has threads of its own); Python still runs the handler on the main thread."""
    others = threading.Event()
    stop = threading.Event()

    def idle() -> None:
        others.set()
        stop.wait(5)

    helper = threading.Thread(target=idle, daemon=True)
    helper.start()
    others.wait(5)
    try:
        with pytest.raises(KeyboardInterrupt), slurm._interrupts_held() as release:
            signal.pthread_kill(helper.ident or 0, signal.SIGINT)  # taken by the other thread
            time.sleep(0.2)  # the handler has run on this thread: held, nothing raised yet
            release()
    finally:
        stop.set()
        helper.join(5)


# --- the working directory was deleted ----------------------------------------------------------


def test_a_deleted_working_directory_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    fake_slurm: FakeSlurm,
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = tmp_path / "t.py"
    script.write_text("import horovod.torch as hvd\n")
    monkeypatch.chdir(gone)
    gone.rmdir()
    fake_slurm.on_submit = lambda script, argv: pytest.fail("submitted")
    monkeypatch.setattr(machine.ThisMachine, "srun_mpi_plugins", property(lambda _: None))
    expected = (
        "hvd-container: error: the current directory no longer exists: "
        "cd to an existing directory and run again\n"
    )
    for site in ("zih-alpha", "local"):
        code, _, err = cli(capsys, "run", "--site", site, "--image", "/", "-n", "8", str(script))
        assert (code, err) == (2, expected), site


# --- Jupyter ------------------------------------------------------------------------------------


def test_ctrl_c_while_waiting_for_jupyter_cancels_its_job(
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    image: Path,
    cancelled: list[str],
    fake_slurm: FakeSlurm,
) -> None:
    def job_info(job_id: str) -> Job:
        raise KeyboardInterrupt

    fake_slurm.on_submit = lambda script, argv: "77"
    fake_slurm.on_job = job_info
    with pytest.raises(KeyboardInterrupt):
        jupyter.start(
            load_site("local"), LaunchRequest(script="jupyter", image=str(image)), Reporter()
        )
    assert cancelled == ["77"]


def test_jupyter_is_ready_only_with_its_own_port(job_dir: Path) -> None:
    log = write(job_dir / "jupyter_9.err", "")
    job = Job("9", "jupyter", "RUNNING", None, None, stderr=str(log), workdir=str(job_dir))
    write(log, "[I ServerApp] http://node1:8888/lab\n")  # another server's line
    assert not jupyter.server_ready(job, 23456)
    write(log, "[I ServerApp] Jupyter Server 2.14 is running at:\n")
    assert not jupyter.server_ready(job, 23456)
    write(log, "[I ServerApp] http://node1:23456/lab?token=...\n")
    assert jupyter.server_ready(job, 23456)


# --- the local image cache ---------------------------------------------------------------------


def _sif(path: Path) -> Path:
    objs = [DataObject(fmt.DATA_LABELS, json.dumps({}).encode(), name="labels.json")]
    payload = bytes(4096)
    prefix = sif_prefix(
        objs,
        partition_size=len(payload),
        arch="amd64",
        created=1700000000,
        image_id=uuid.UUID(int=5),
    )
    path.write_bytes(prefix + payload)
    return path


def test_a_concurrent_unpack_of_the_same_image_counts_as_success(
    monkeypatch: pytest.MonkeyPatch, job_dir: Path
) -> None:
    sif = _sif(job_dir / "a.sif")
    target = charliecloud.cache_dir() / charliecloud.sif_digest(sif)
    parts: list[str] = []

    def unsquashfs(argv: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        partial = Path(argv[argv.index("-d") + 1])
        parts.append(partial.name)
        write(partial / "etc" / "os-release", "mine\n")
        if len(parts) == 1:
            write(target / "etc" / "os-release", "theirs\n")  # another run finished first
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(charliecloud.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(charliecloud.subprocess, "run", unsquashfs)
    charliecloud._unpack_sif(sif, target)
    assert (target / "etc" / "os-release").read_text() == "theirs\n"
    charliecloud._unpack_sif(sif, target.with_name("other"))
    assert parts[0] != parts[1] and f".part-{os.getpid()}-" in parts[0]
    made = sorted(p.name for p in target.parent.iterdir() if p.name != charliecloud.RECORDS)
    assert made == sorted(["other", target.name])
    assert os.listdir(target.parent / charliecloud.RECORDS) == []  # the partial records went too


def test_an_unusable_cache_directory_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, job_dir: Path, image: Path
) -> None:
    blocker = write(job_dir / "not-a-dir", "")
    monkeypatch.setenv("HVD_CONTAINER_CACHE", str(blocker))
    monkeypatch.setattr(charliecloud.shutil, "which", lambda name: f"/usr/bin/{name}")
    for source in (str(_sif(job_dir / "a.sif")), str(image)):
        with pytest.raises(UserError) as info:
            charliecloud.prepare_image(source)
        message = str(info.value)
        assert message.startswith(f"image cache {blocker}/images: ") and "\n" not in message
        assert "set $HVD_CONTAINER_CACHE to a writable directory" in message


# --- Jupyter's runtime files, address and tunnel ------------------------------------------------


def _bootstrap(tmp_path: Path, interface: str, env: dict[str, str]) -> dict[str, Any]:
    """Run jupyter.BOOTSTRAP with a stand-in `jupyterlab` module that reports what it got."""
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    (fake / "jupyterlab.py").write_text(
        "import json, os, stat, sys\n"
        "d = os.environ['JUPYTER_RUNTIME_DIR']\n"
        "print(json.dumps({'argv': sys.argv[1:], 'dir': d, 'mode': stat.S_IMODE(os.stat(d).st_mode)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", jupyter.BOOTSTRAP, interface, "--port=1"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(fake), **env},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_jupyters_runtime_files_go_to_a_private_directory(tmp_path: Path) -> None:
    runtime = tmp_path / "run-user"
    runtime.mkdir()
    got = _bootstrap(tmp_path, "", {"XDG_RUNTIME_DIR": str(runtime)})
    assert Path(got["dir"]).parent == runtime and got["mode"] == 0o700
    assert got["argv"] == ["--ip=0.0.0.0", "--port=1"]
    elsewhere = _bootstrap(tmp_path, "", {"TMPDIR": str(tmp_path)})  # no runtime dir on the node
    assert Path(elsewhere["dir"]).parent == tmp_path and elsewhere["mode"] == 0o700


def test_jupyter_listens_on_the_named_interface_only(tmp_path: Path) -> None:
    assert _bootstrap(tmp_path, "lo", {})["argv"][0] == "--ip=127.0.0.1"
    done = subprocess.run(
        [sys.executable, "-c", jupyter.BOOTSTRAP, "nosuch0"], capture_output=True, text=True
    )
    assert done.returncode == 1 and "interface nosuch0 has no IPv4 address" in done.stderr


def test_the_jupyter_request_names_the_sites_interface() -> None:
    req = jupyter.jupyter_request(
        LaunchRequest(script="jupyter", image="x.sif"), 23456, "t", "/w", "hsn0"
    )
    assert req.args[:3] == ["-c", jupyter.BOOTSTRAP, "hsn0"]
    assert "JUPYTER_RUNTIME_DIR" not in req.env and req.env["JUPYTER_TOKEN"] == "t"


def test_the_tunnel_goes_to_the_address_jupyter_reports(job_dir: Path) -> None:
    log = write(
        job_dir / "jupyter_9.err",
        "http://127.0.0.1:23456/lab?token=x\nhttp://10.1.2.3:23456/lab?token=x\n",
    )
    job = Job("9", "jupyter", "RUNNING", None, None, stderr=str(log), workdir=str(job_dir))
    assert jupyter.listening_host(job, 23456) == "10.1.2.3"
    session = jupyter.JupyterSession(
        "9", "nid0001", "10.1.2.3", 23456, "t", "login x", "al'ice", "10.1.2.3"
    )
    assert session.ssh_line == "ssh -L localhost:23456:10.1.2.3:23456 'al'\"'\"'ice@login x'"


def test_jupyter_dry_run_prints_the_job_and_submits_nothing(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    image: Path,
    fake_slurm: FakeSlurm,
) -> None:
    """Like run and batch: the script the job would be, with a port and a token chosen as a
    launch chooses them; nothing is prepared, asked of Slurm or submitted."""
    fake_slurm.on_submit = lambda script, argv: pytest.fail("submitted")
    code, out, err = cli(capsys, "jupyter", "--site", "local", "--image", str(image), "--dry-run")
    assert code == 0, err
    assert out.startswith("#!/bin/bash\n#SBATCH --job-name=jupyter\n")
    step = job_command(out)
    assert step.startswith(
        "srun --mpi=none --kill-on-bad-exit=1 --job-name=jupyter -N 1 --ntasks-per-node=1 "
    )
    port = re.search(r"--port=(\d+)", step)
    assert port is not None and 20000 <= int(port[1]) < 60000
    token = re.search(r"^export JUPYTER_TOKEN=(\S+)$", out, re.M)
    assert token is not None and len(token[1]) >= 40 and token[1] not in step
    code, out, _ = cli(
        capsys, "jupyter", "--site", "local", "--image", str(image), "--dry-run", "--json"
    )
    record = result("jupyter-dry-run", out)
    assert code == 0 and record["script"].startswith("#!/bin/bash\n")
