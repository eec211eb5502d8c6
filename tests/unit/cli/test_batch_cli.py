"""`hvd-container batch`: the sbatch script on stdout or written atomically with -o."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _launch_helpers import isolated, plan_launch, write  # noqa: F401
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import load_site

from hvd_container.cli.app import main

ARGS = ["--site", "zih-alpha", "--image", "x.sif", "-n", "16", "-t", "1:00:00"]
ARGS += ["-e", "NCCL_SOCKET_IFNAME=ib0", "-e", "NCCL_NET=IB"]


@pytest.fixture(autouse=True)
def in_job_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from a directory holding the image file and the script the tests name."""
    job = tmp_path / "job"
    write(job / "x.sif", "")
    write(job / "train.py", "import horovod.torch as hvd\n")
    monkeypatch.chdir(job)
    return job


def test_batch_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["batch", *ARGS, "train.py", "--epochs", "3"]) == 0
    out = capsys.readouterr().out
    expected = plan_launch(
        load_site("zih-alpha"),
        LaunchRequest(
            script="train.py",
            args=["--epochs", "3"],
            image="x.sif",
            ntasks=16,
            time="1:00:00",
            env={"NCCL_SOCKET_IFNAME": "ib0", "NCCL_NET": "IB"},
        ),
        "batch",
    ).script
    assert out == expected


def test_batch_to_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "job.sh"
    assert main(["batch", *ARGS, "-o", str(target), "train.py"]) == 0
    assert target.read_text().startswith("#!/bin/bash\n#SBATCH --job-name=train\n")
    assert os.stat(target).st_mode & 0o777 == 0o700  # it can carry --env values
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"wrote {target}"
    # the image lies in this test's /tmp folder, which compute nodes would not see
    assert err[:-1] == [
        f"hvd-container: warning: image {target.parent.parent / 'job' / 'x.sif'} is in a "
        "node-local place (/tmp, /var/tmp, /dev/shm, /run): the compute nodes see their own, "
        "not this one; move it to a shared file system (home, project or scratch)"
    ]
    assert [p.name for p in out_dir.iterdir()] == ["job.sh"]


def test_batch_error_leaves_nothing_behind(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "job.sh"
    code = main(
        ["batch", "--site", "neuron", "--image", "x.sif", "-n", "8", "-o", str(target), "t.py"]
    )
    assert code == 2
    assert "and requires it" in capsys.readouterr().err
    assert list(out_dir.iterdir()) == []


def test_batch_unwritable_target(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["batch", *ARGS, "-o", str(tmp_path / "missing" / "job.sh"), "t.py"])
    assert code == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(
            f"hvd-container: error: -o/--output {tmp_path}/missing/job.sh: directory "
            f"{tmp_path}/missing does not exist"
        )
        and err.count("\n") == 1
    )


def test_batch_keeps_an_existing_file_on_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = write(tmp_path / "job.sh", "old\n")
    assert main(["batch", "--site", "neuron", "--image", "x.sif", "-o", str(target), "t.py"]) == 2
    assert target.read_text() == "old\n"


def test_batch_to_a_group_readable_file_becomes_owner_only(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = write(tmp_path / "job.sh", "old\n")
    target.chmod(0o644)
    assert main(["batch", *ARGS, "-e", "TOKEN=s3cret", "-o", str(target), "train.py"]) == 0
    assert os.stat(target).st_mode & 0o777 == 0o700
    assert "TOKEN=s3cret" in target.read_text()


def test_batch_refuses_to_write_through_a_symlink(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    elsewhere = write(tmp_path / "elsewhere.sh", "theirs\n")
    link = tmp_path / "job.sh"
    link.symlink_to(elsewhere)
    assert main(["batch", *ARGS, "-o", str(link), "train.py"]) == 2
    assert capsys.readouterr().err == (
        f"hvd-container: error: -o/--output {link}: is a symbolic link (to {elsewhere}); "
        "name the file itself, or remove the link\n"
    )
    assert link.is_symlink() and elsewhere.read_text() == "theirs\n"


def test_batch_dash_is_standard_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["batch", *ARGS, "-o", "-", "train.py"]) == 0
    assert capsys.readouterr().out.startswith("#!/bin/bash\n")
    assert list(here.iterdir()) == []


def test_sbatchs_output_and_error_go_by_their_own_names(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["batch", *ARGS, "--job-output", "logs/%x_%j.log", "--job-error", "logs/%j.err"]
    assert main([*argv, "train.py"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "#SBATCH --output=logs/%x_%j.log" in lines and "#SBATCH --error=logs/%j.err" in lines
    assert main(["batch", *ARGS, "train.py"]) == 0  # the defaults: job name and id
    lines = capsys.readouterr().out.splitlines()
    assert "#SBATCH --output=%x_%j.out" in lines and "#SBATCH --error=%x_%j.err" in lines
    assert main(["batch", *ARGS, "--job-output", "a b.log", "train.py"]) == 0
    assert '#SBATCH --output="a b.log"' in capsys.readouterr().out.splitlines()


def test_batch_help_says_what_o_and_e_mean_here(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    assert main(["batch", "--help"]) == 0
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", capsys.readouterr().out).split())
    assert "Not sbatch's -o/--output, the job's stdout file: that is --job-output" in text
    assert "Not sbatch's -e/--error: that is --job-error" in text
    assert "--job-output" in text and "sbatch's -o/--output" in text
