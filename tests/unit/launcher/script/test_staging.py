"""--stage (launcher/script/staging.py, launcher/programs/stage_image.sh): which launches it takes,
and what its helper does with the step. The helper runs here under sh with a STAND-IN sbcast
(a copy, as sbcast makes on each node); tests/e2e/test_stage.py runs the real one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _launch_helpers import check_golden, isolated, job_dir, plan_launch, write  # noqa: F401
from _shell import job_command
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.script.staging import STAGE
from hvd_container.launcher.sites.loader import load_site

from hvd_container.core.errors import UserError


@pytest.fixture
def fake_sbcast(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    write(bin_dir / "sbcast", '#!/bin/sh\n[ "$1" = --force ] && shift\ncp "$1" "$2"\n')
    # srun on one node: its options (each a word of its own) left out, the command run here
    write(bin_dir / "srun", '#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n')
    for tool in ("sbcast", "srun"):
        (bin_dir / tool).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def stage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", STAGE, "hvd-stage", *args], capture_output=True, text=True, env=env
    )


def test_the_helper_copies_the_image_into_a_private_folder_and_rewrites_one_word(
    tmp_path: Path, fake_sbcast: dict[str, str]
) -> None:
    image = write(tmp_path / "job" / "my image.sif", "IMAGE")
    local = tmp_path / "local"
    local.mkdir()
    step = ["printf", "%s\\n", "srun", f"--container-image={image}", "train.py", str(image),
            f"--compare={image}"]  # fmt: skip
    for at, named in ((3, "--container-image={}"), (5, "{}")):
        done = stage({**fake_sbcast, "SLURM_JOB_ID": "42"}, str(local), str(image), str(at), *step)
        assert done.returncode == 0, done.stderr
        folder = max(local.glob("hvd-stage-42-*"), key=lambda p: p.stat().st_mtime_ns)
        assert (
            len(folder.name) == len("hvd-stage-42-") + 16 and folder.stat().st_mode & 0o777 == 0o700
        )
        copy = folder / "my image.sif"
        assert copy.read_text() == "IMAGE"
        # the runtime's word names the copy; the script's own arguments stay as given
        expected = [w for w in step[2:]]
        expected[at - 2] = named.format(copy) if at == 3 else str(copy)
        assert done.stdout.splitlines() == expected
        assert done.stderr == f"hvd-container stage: {image} copied to {copy} on the job's nodes\n"
    assert len(list(local.glob("hvd-stage-42-*"))) == 2  # a name of its own each time


def test_without_a_step_the_helper_prints_the_copys_path(
    tmp_path: Path, fake_sbcast: dict[str, str]
) -> None:
    """A batch script's form: the copy made, its path the one line of output."""
    image = write(tmp_path / "job" / "i.sqfs", "IMAGE")
    local = tmp_path / "local"
    local.mkdir()
    done = stage({**fake_sbcast, "SLURM_JOB_ID": "7"}, str(local), str(image))
    assert done.returncode == 0, done.stderr
    (folder,) = local.glob("hvd-stage-7-*")
    assert done.stdout == f"{folder / 'i.sqfs'}\n"
    assert (folder / "i.sqfs").read_text() == "IMAGE"


def test_the_helper_outside_an_allocation_says_so(fake_sbcast: dict[str, str]) -> None:
    env = {k: v for k, v in fake_sbcast.items() if k != "SLURM_JOB_ID"}
    done = stage(env, "/tmp", "x.sif", "0", "true")
    assert done.returncode == 1
    assert done.stderr.startswith("hvd-container stage: no SLURM_JOB_ID: sbcast copies")


def test_a_failed_copy_stops_before_the_step(tmp_path: Path, fake_sbcast: dict[str, str]) -> None:
    done = stage({**fake_sbcast, "SLURM_JOB_ID": "1"}, str(tmp_path / "no-such-dir"),
                 str(write(tmp_path / "x.sif", "")), "0", "echo", "ran")  # fmt: skip
    assert done.returncode == 1 and "ran" not in done.stdout
    assert "could not make the private folder" in done.stderr and "writable there" in done.stderr


def _plan(site: str, **fields: Any) -> Any:
    return plan_launch(load_site(site), LaunchRequest(script="train.py", stage=True, **fields))


@pytest.mark.usefixtures("job_dir")
def test_a_staged_launch_wraps_its_step_in_the_helper() -> None:
    """Inside an allocation the step runs under the helper; a batch script stages first and
    its srun line names the copy where the image was."""
    planned = _plan("local", image="i.sqfs", nodes=2, ntasks_per_node=1)
    assert planned.step[:6] == ["sh", "-c", STAGE, "hvd-stage", "/tmp", "i.sqfs"]
    at = int(planned.step[6])
    assert planned.step[7] == "srun" and planned.step[7 + at] == "i.sqfs"
    check_golden("local-stage.sh", planned.script)
    lines = [line.strip() for line in planned.script.splitlines()]
    assert 'hvd_staged=$(sh -c "$hvd_stage_image" hvd-stage /tmp i.sqfs) || exit 1' in lines
    srun = job_command(planned.script)
    assert ' "$hvd_staged" -- ' in srun and "i.sqfs" not in srun


def test_the_batch_script_runs_the_staged_copy(
    tmp_path: Path, monkeypatch: Any, fake_sbcast: dict[str, str]
) -> None:
    """bash runs the script with STAND-INs for srun and sbcast (and ch-run printing its words):
    the step's image word is the copy's path, made before the step."""
    job = tmp_path / "job"
    write(job / "train.py", "")
    (job / "i.sqfs").write_bytes(b"hsqs" + bytes(92))  # a SquashFS superblock's magic
    monkeypatch.chdir(job)
    stage_dir = tmp_path / "local"
    stage_dir.mkdir()
    site = write(
        tmp_path / "s.yaml", f"extends: local\nname: s\nimages: {{stage_dir: {stage_dir}}}\n"
    )
    planned = plan_launch(
        load_site(str(site)),
        LaunchRequest(script="train.py", stage=True, image="i.sqfs", nodes=2, ntasks_per_node=1),
    )
    write(tmp_path / "bin" / "ch-run", '#!/bin/sh\nprintf "%s\\n" "$@"\n').chmod(0o755)
    # srun on one node: its options (-N and -n with a value of their own) left out
    steps = write(
        tmp_path / "step-bin" / "srun",
        '#!/bin/sh\nwhile :; do case $1 in -N|-n) shift 2;; -*) shift;; *) break;; esac; done\nexec "$@"\n',
    )
    steps.chmod(0o755)
    done = subprocess.run(
        ["bash", "-c", planned.script], capture_output=True, text=True, cwd=job,
        env={**fake_sbcast, "SLURM_JOB_ID": "9", "SLURM_JOB_NUM_NODES": "1",
             "PATH": f"{steps.parent}:{fake_sbcast['PATH']}"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (folder,) = stage_dir.glob("hvd-stage-9-*")
    words = done.stdout.splitlines()
    assert str(folder / "i.sqfs") in words and "i.sqfs" not in words


@pytest.mark.parametrize(
    ("site", "fields", "message"),
    [
        ("perlmutter", dict(image="u/i:1", account="m1_g"),
         r"^--stage copies an image file to the nodes; 'u/i:1' is a registry reference, which runtime shifter fetches itself: leave --stage out$"),
        ("cscs-daint", dict(image="/x/i.sqsh", account="a"),
         r"^--stage: runtime container-engine does not run /x/i.sqsh from the srun line "),
    ],
)  # fmt: skip
def test_a_launch_with_no_image_file_on_its_srun_line_refuses_stage(
    site: str, fields: dict[str, Any], message: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "train.py", "")
    with pytest.raises(UserError, match=message):
        _plan(site, nodes=2, **fields)


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_stage_dir_others_may_rename_in_is_refused(
    tmp_path: Path, fake_sbcast: dict[str, str], mode: int
) -> None:
    image = write(tmp_path / "x.sif", "IMAGE")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    done = stage({**fake_sbcast, "SLURM_JOB_ID": "1"}, str(shared), str(image), "0", "echo", "ran")
    assert done.returncode == 1 and "ran" not in done.stdout
    assert "either yours alone or sticky" in done.stderr and list(shared.iterdir()) == []
    shared.chmod(mode | 0o1000)  # sticky, as /tmp: only an entry's owner renames it
    done = stage({**fake_sbcast, "SLURM_JOB_ID": "1"}, str(shared), str(image), "0", "echo", "ran")
    assert done.returncode == 0 and done.stdout == "ran\n", done.stderr
