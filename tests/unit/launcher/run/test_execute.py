"""One preparation for every launch path: the dry-run line is the line a run executes, and
batch scripts (written or submitted) carry the same preparation (Gloo wrapper, --mpi=none,
local image directory, binds, $USER, preflight of the image the launch really uses)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from _fake_slurm import FakeSlurm
from _fakes import write_sif
from _launch_helpers import isolated, words, write  # noqa: F401
from _shell import bash_words, job_command, snippet_words
from hvd_container.launcher.plan.planner import SCRIPT_END
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.run import execute
from hvd_container.launcher.runtimes import charliecloud
from hvd_container.launcher.sites import machine
from hvd_container.launcher.slurm import Job

from hvd_container.cli.app import main

GLOO_ARGS = ["--site", "local", "--controller", "gloo", "-N", "2", "--ntasks-per-node", "1"]


def image_dir(path: Path) -> Path:
    """An image directory with an environment file, as the SIF writer leaves it."""
    write(
        path / ".singularity.d" / "env" / "10-docker2singularity.sh",
        "export PATH='/opt/venv/bin:/usr/bin'\n",
    )
    return path


class Recorder:
    """Stands in for what would touch Slurm: srun --mpi=list and srun on this machine, and
    the fake Slurm (submit answers job 4242, which has completed)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fake: FakeSlurm) -> None:
        self.fake = fake
        self.foreground: list[tuple[list[str], dict[str, str]]] = []
        self.mpi_list_calls = 0
        fake.on_submit = lambda script, argv: "4242"
        fake.records["4242"] = Job("4242", "x", "COMPLETED", 0, 0)
        monkeypatch.setattr(
            machine.ThisMachine, "srun_mpi_plugins", property(lambda _: self.mpi_list())
        )
        monkeypatch.setattr(execute, "_run_foreground", self.run_foreground)

    @property
    def scripts(self) -> list[str]:
        return [script for script, _argv in self.fake.submitted]

    @property
    def submitted(self) -> list[list[str]]:
        return [argv for _script, argv in self.fake.submitted]

    @property
    def cancelled(self) -> list[str]:
        return self.fake.cancelled

    def mpi_list(self) -> list[str]:
        self.mpi_list_calls += 1
        return ["pmix", "none", "pmi2"]

    def run_foreground(self, argv: list[str], env: dict[str, str]) -> int:
        self.foreground.append((argv, env))
        return 0


@pytest.fixture()
def slurm_stub(monkeypatch: pytest.MonkeyPatch, fake_slurm: FakeSlurm) -> Recorder:
    return Recorder(monkeypatch, fake_slurm)


@pytest.fixture()
def job_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    job = tmp_path / "job"
    write(job / "train.py", "import horovod.torch as hvd\nhvd.init()\n")
    monkeypatch.chdir(job)
    monkeypatch.setenv("USER", "alice")
    monkeypatch.setenv("HVD_CONTAINER_CACHE", str(tmp_path / "cache"))
    return job


@pytest.fixture()
def no_unpack(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """unsquashfs stand-in: the target directory appears with an image's env file."""
    unpacked: list[Path] = []

    def unpack(sif: Path, target: Path) -> None:
        image_dir(target)
        unpacked.append(target)

    monkeypatch.setattr(charliecloud, "_unpack_sif", unpack)
    return unpacked


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def shown(argv: list[str], env: dict[str, str]) -> list[str]:
    """The words of the command run, as a dry run shows them (`env K=V ...` first)."""
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv] if env else argv


# --- the dry-run line is the executed line ---------------------------------------------------


def dry_run_then_run(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    """`run --dry-run ARGS`, then `run ARGS` (Slurm stood in for): what the dry run printed."""
    code, printed, err = cli(capsys, "run", "--dry-run", *args)
    assert code == 0, err
    code, _, err = cli(capsys, "run", *args)
    assert code == 0, err
    return printed


def test_dry_run_line_is_the_line_run_executes_gloo_and_image_directory(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    slurm_stub: Recorder,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "7")  # inside an allocation: run executes srun here
    image = image_dir(tmp_path / "img")
    args = [*GLOO_ARGS, "--image", str(image), "train.py", "--epochs", "2"]
    code, _, err = cli(capsys, "run", "--dry-run", *args)
    assert code == 0 and slurm_stub.mpi_list_calls == 0, err  # a dry run asks Slurm nothing
    printed = dry_run_then_run(capsys, args)
    ((argv, env),) = slurm_stub.foreground
    assert snippet_words(printed) == shown(argv, env)
    # what the Gloo path and ch-run need, in both
    assert argv[:2] == ["srun", "--mpi=none"]
    assert env["USER"] == "alice"
    assert f"-b {job_dir}:{job_dir}" in printed and f"-c {job_dir}" in printed
    assert "RendezvousServer" in argv[argv.index("/bin/sh") + 4]
    assert argv[-3:] == ["train.py", "--epochs", "2"]


@pytest.mark.parametrize(
    "how, allocation, flags",
    [("step", "7", []), ("sbatch", None, []), ("salloc", "7", ["--salloc"])],
)
def test_run_executes_exactly_what_the_dry_run_showed(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    slurm_stub: Recorder,
    tmp_path: Path,
    how: str,
    allocation: str | None,
    flags: list[str],
) -> None:
    """Inside an allocation the srun line; outside one sbatch and the script on its stdin;
    with --salloc (an allocation of its own, even from inside one) the salloc line."""
    if allocation:
        monkeypatch.setenv("SLURM_JOB_ID", allocation)
    else:
        monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    image = image_dir(tmp_path / "img")
    printed = dry_run_then_run(capsys, [*GLOO_ARGS, *flags, "--image", str(image), "t.py", "-x"])
    if how == "sbatch":
        ((argv,),) = [slurm_stub.submitted]
        (script,) = slurm_stub.scripts
        assert printed == f"{shlex.join(argv)} <<'{SCRIPT_END}'\n{script}{SCRIPT_END}\n"
        assert argv == ["sbatch", "--parsable", f"--chdir={job_dir}"]
        assert slurm_stub.foreground == []  # no srun of its own outside the job
        return
    ((argv, env),) = slurm_stub.foreground
    assert snippet_words(printed) == shown(argv, env) and slurm_stub.scripts == []
    assert argv[0] == ("salloc" if how == "salloc" else "srun")
    assert ("--nodes=2" in argv) == (how == "salloc")  # the step asks for no resources


def test_dry_run_shows_the_unpacked_cache_directory_of_a_local_sif(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    slurm_stub: Recorder,
    no_unpack: list[Path],
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    sif = write_sif(job_dir / "cpu_1.sif")
    args = ["--site", "local", "--image", str(sif), "-N", "2", "--ntasks-per-node", "1", "train.py"]
    code, printed, err = cli(capsys, "run", "--dry-run", *args)
    assert code == 0, err
    assert no_unpack == []  # computed from the SIF header, nothing unpacked
    key = charliecloud.sif_digest(sif)
    cache = Path(charliecloud.cache_dir())
    assert f"--set-env={cache / (key + '.env')} {cache / key} -- " in printed
    assert not cache.exists()
    code, _, err = cli(capsys, "run", *args)
    assert code == 0, err
    assert no_unpack == [cache / key]
    ((argv, env),) = slurm_stub.foreground
    assert snippet_words(printed) == shown(argv, env)
    assert argv[1] == "--mpi=pmix"


# --- batch scripts get the same preparation ---------------------------------------------------


def test_batch_script_runs_the_gloo_wrapper_with_mpi_none(
    capsys: pytest.CaptureFixture[str], job_dir: Path, slurm_stub: Recorder
) -> None:
    # the audit's example: /tmp as a directory image
    code, script, err = cli(capsys, "batch", *GLOO_ARGS, "--image", "/tmp", "x.py")
    assert code == 0, err
    srun = bash_words(job_command(script).split("srun ", 1)[1])
    assert srun[0] == "--mpi=none"
    assert "/bin/sh" in srun and "RendezvousServer" in script
    assert srun[-2:] == ["/opt/venv/bin/python", "x.py"]
    assert "#SBATCH --job-name=x" in script
    assert "export USER=alice" in script
    assert slurm_stub.mpi_list_calls == 0


def test_batch_submit_sends_the_script_batch_writes(
    capsys: pytest.CaptureFixture[str], job_dir: Path, slurm_stub: Recorder, tmp_path: Path
) -> None:
    image = str(image_dir(tmp_path / "img"))
    code, written, err = cli(capsys, "batch", *GLOO_ARGS, "--image", image, "train.py")
    assert code == 0, err
    code, _, err = cli(capsys, "batch", *GLOO_ARGS, "--image", image, "--submit", "train.py")
    assert code == 0, err
    assert slurm_stub.scripts == [written]


def test_batch_to_a_file_unpacks_a_local_sif_so_the_script_runs(
    capsys: pytest.CaptureFixture[str], job_dir: Path, no_unpack: list[Path]
) -> None:
    sif = write_sif(job_dir / "cpu_1.sif")
    code, _, err = cli(
        capsys, "batch", "--site", "local", "--image", str(sif), "-n", "2", "-o", "job.sh",
        "train.py",
    )  # fmt: skip
    assert code == 0, err
    root = charliecloud.cache_dir() / charliecloud.sif_digest(sif)
    assert no_unpack == [root]
    script = (job_dir / "job.sh").read_text()
    assert f" {root} -- /opt/venv/bin/python train.py" in script
    env_file = root.parent / f"{root.name}.env"
    assert env_file.read_text() == "PATH=/opt/venv/bin:/usr/bin\n"
    assert (root / str(job_dir).lstrip("/")).is_dir()  # the bind destination exists in it


def test_batch_warns_about_image_environment_lines_it_cannot_pass_on(
    capsys: pytest.CaptureFixture[str], job_dir: Path, tmp_path: Path
) -> None:
    image = image_dir(tmp_path / "img")
    write(
        image / ".singularity.d" / "env" / "90-environment.sh",
        "#!/bin/sh\nexport VIRTUAL_ENV=/opt/venv\nexport HOST=$(hostname)\n",
    )
    code, _, err = cli(
        capsys, "batch", "--site", "local", "--image", str(image), "-n", "1", "-o", "job.sh",
        "train.py",
    )  # fmt: skip
    assert code == 0, err
    assert (
        f"hvd-container: warning: image {image}: /.singularity.d/env/90-environment.sh:3: "
        "'export HOST=$(hostname)' uses shell expansion other than $NAME or ${NAME}: not passed "
        "to ch-run; set it with --env if the job needs it\n"
    ) in err
    env_file = charliecloud.planned(str(image)).env_file
    assert env_file.read_text() == "PATH=/opt/venv/bin:/usr/bin\nVIRTUAL_ENV=/opt/venv\n"


# --- preflight of the image the launch really uses ----------------------------------------------


def test_recipe_without_image_checks_the_templated_image(
    capsys: pytest.CaptureFixture[str], job_dir: Path, slurm_stub: Recorder
) -> None:
    args = ["--site", "local", "--recipe", "cpu-bookworm", "-N", "2", "--ntasks-per-node", "1"]
    code, _, err = cli(capsys, "run", *args, "train.py")
    assert code == 2
    assert err == (
        "hvd-container: error: image of recipe cpu-bookworm (site local's images.template) "
        "cpu-bookworm_1.sif: no such file or directory (make it with `hvd-container build` then "
        "`hvd-container convert --to sif`)\n"
    )
    assert slurm_stub.scripts == []


def test_recipe_without_image_uses_the_templated_sif(
    capsys: pytest.CaptureFixture[str],
    job_dir: Path,
    slurm_stub: Recorder,
    no_unpack: list[Path],
) -> None:
    sif = write_sif(job_dir / "cpu-bookworm_1.sif", {"org.hvd-container.arch": "amd64"})
    args = ["--site", "local", "--recipe", "cpu-bookworm", "-N", "2", "--ntasks-per-node", "1"]
    code, _, err = cli(capsys, "run", "--detach", *args, "train.py")
    assert code == 0, err
    root = charliecloud.cache_dir() / charliecloud.sif_digest(sif)
    assert no_unpack == [root]
    (script,) = slurm_stub.scripts
    assert f" {root} -- /opt/venv/bin/python train.py" in script


def test_sif_labels_are_checked_in_a_dry_run(
    capsys: pytest.CaptureFixture[str], job_dir: Path, no_unpack: list[Path]
) -> None:
    sif = write_sif(job_dir / "p9.sif", {"org.hvd-container.arch": "ppc64le"})
    code, out, err = cli(capsys, "run", "--site", "local", "--image", str(sif), "--dry-run", "t.py")
    assert code == 2 and out == ""
    assert "is built for ppc64le but site local runs amd64" in err


def test_missing_image_file_warns_in_a_dry_run_and_stops_a_run(
    capsys: pytest.CaptureFixture[str], job_dir: Path, slurm_stub: Recorder
) -> None:
    args = ["--site", "zih-alpha", "--image", "gone.sif", "-n", "8"]
    code, out, err = cli(capsys, "run", *args, "--dry-run", "t.py")
    assert code == 0 and out.startswith("sbatch ")
    assert "--image gone.sif: no such file or directory" in err
    code, out, err = cli(capsys, "run", *args, "t.py")
    assert code == 2 and out == ""
    assert err.startswith("hvd-container: error: --image gone.sif: no such file or directory")
    assert slurm_stub.scripts == []


def test_the_mpi_plugin_is_checked_against_srun_only_when_launching(
    capsys: pytest.CaptureFixture[str],
    job_dir: Path,
    slurm_stub: Recorder,
    tmp_path: Path,
) -> None:
    image = str(image_dir(tmp_path / "img"))
    args = ["--site", "local", "--image", image, "--mpi", "cray_shasta", "-n", "2", "train.py"]
    code, _, err = cli(capsys, "run", "--dry-run", *args)
    assert code == 0, err
    code, _, err = cli(capsys, "run", *args)
    assert code == 2
    assert (
        "--mpi=cray_shasta: this cluster's srun does not offer it (allowed: pmix, none, pmi2)"
        in err
    )


# --- usage --------------------------------------------------------------------------------------


def test_an_unknown_option_before_the_script_is_refused(
    capsys: pytest.CaptureFixture[str], job_dir: Path, slurm_stub: Recorder
) -> None:
    code, out, err = cli(
        capsys,
        "run",
        "--site",
        "zih-alpha",
        "--image",
        "x.sif",
        "--ntask",
        "8",
        "t.py",
        "--dry-run",
    )
    assert code == 2 and out == ""
    assert err.startswith("hvd-container: error: No such option: --ntask") and err.count("\n") == 1
    assert slurm_stub.scripts == [] and slurm_stub.foreground == []


def test_a_script_starting_with_a_dash_goes_after_double_dash(
    capsys: pytest.CaptureFixture[str], job_dir: Path
) -> None:
    code, out, err = cli(
        capsys, "run", "--site", "zih-alpha", "--image", "docker:u/i:1", "-n", "1", "--dry-run",
        "--", "-odd.py", "--dry-run",
    )  # fmt: skip
    assert code == 0, err
    step = out.splitlines()[-2]  # the script's srun line, before the here-document's end
    assert shlex.split(step)[-3:] == ["python", "./-odd.py", "--dry-run"]


def test_mpi_plugin_names_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "run", "--site", "local", "--mpi", "pmi3", "--dry-run", "t.py")
    assert code == 2
    assert err == (
        "hvd-container: error: --mpi: 'pmi3' is not allowed "
        "(allowed: pmi2, pmix, pmix_v3, pmix_v4, pmix_v5, cray_shasta, none)\n"
    )


def test_podman_hpc_gets_the_working_directory_and_a_user(
    job_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """podman mounts nothing on its own and podman-hpc needs $USER (no login terminal in a
    batch job): the launch binds the working directory, starts there and names the user."""
    from hvd_container.launcher.plan.planner import plan
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.loader import load_site

    monkeypatch.delenv("USER", raising=False)
    request = LaunchRequest(script="train.py", image="reg/i:1", runtime="podman-hpc", nodes=2)
    planned = plan(load_site("local"), request, dry_run=True)
    cwd = str(job_dir)
    podman = planned.step[words(planned).index("podman-hpc") :]
    assert f"{cwd}:{cwd}" in podman and podman[podman.index("-w") + 1] == cwd
    assert planned.env["USER"] and "USER" in podman


def test_run_until_done_follows_each_segment_a_job_of_its_own(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_dir: Path,
    slurm_stub: Recorder,
    tmp_path: Path,
) -> None:
    """At a site without requeue each segment is a job that depends on the last: `run` follows
    the one each job's log names (slurm.next_segment reads it), then says what it took."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    logs = {"4242": "4243", "4243": "4244", "4244": None}
    for job_id in logs:
        out = str(tmp_path / f"{job_id}.out")
        slurm_stub.fake.records[job_id] = Job(job_id, "x", "COMPLETED", 0, 0, stdout=out)
    for job_id, following in logs.items():
        said = "hvd-container: segment 0 ended at the time limit: segment 1 is job "
        if job_id == "4243":  # a job that lost a node it could not spare hands over too
            said = "hvd-container: segment 1 ended with nodes lost (node3): segment 2 is job "
        (tmp_path / f"{job_id}.out").write_text(
            f"{said}{following}, from the last checkpoint\n" if following else "done\n"
        )
    image = image_dir(tmp_path / "img")
    code = main(["run", *GLOO_ARGS, "--until-done", "--time", "10", "--image", str(image), "t.py"])
    followed = list(dict.fromkeys(slurm_stub.fake.asked))
    assert code == 0 and followed == ["4242", "4243", "4244"]
    err = capsys.readouterr().err
    assert "job 4242 goes on as job 4243 (--until-done)" in err
    assert "--until-done: 3 segments, jobs 4242, 4243, 4244: the last completed" in err


@pytest.mark.parametrize("watched", [False, True])
def test_a_path_given_to_the_step_is_not_where_the_tool_finds_srun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, watched: bool
) -> None:
    """`-e PATH=1` inside an allocation: the step's PATH, not this shell's (it was a
    traceback: FileNotFoundError for srun)."""
    from hvd_container.launcher.plan.request import LaunchRequest

    bin_dir = tmp_path / "bin"
    write(bin_dir / "srun", f'#!/bin/sh\necho "$PATH" > {tmp_path}/ran\n')
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    if watched:
        request = LaunchRequest(script="t.py", hang_after=60)
        code = execute._run_watched(["srun", "x"], {"PATH": "1"}, request, Reporter(), 0.05)
    else:
        code = execute._run_foreground(["srun", "x"], {"PATH": "1"})
    assert code == 0 and (tmp_path / "ran").read_text() == "1\n"  # the step's own PATH
