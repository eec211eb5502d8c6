"""`hvd-container run`: --dry-run prints exactly one shell-quoted line; errors are one line."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _launch_helpers import isolated, write  # noqa: F401

from hvd_container.cli.app import main

HOSTILE = ["--lr", "0.1", "a b", "it's", "x;y", "$HOME", "-n", "--dry-run", "--help"]


@pytest.fixture(autouse=True)
def in_job_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from a directory holding the image file and the scripts the tests name, as user
    `alice`."""
    job = tmp_path / "job"
    write(job / "x.sif", "")
    for name in ("train.py", "t.py"):
        write(job / name, "import horovod.torch as hvd\n")
    monkeypatch.chdir(job)
    monkeypatch.setenv("USER", "alice")
    return job


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_inside_an_allocation_the_dry_run_prints_the_srun_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    code, out, err = run(
        capsys, "--site", "perlmutter", "--image", "u/img:tag", "-n", "8", "--account", "m1_g",
        "--controller", "mpi", "--dry-run", "train.py", "--", *HOSTILE,
    )  # fmt: skip
    assert code == 0, err
    assert out.count("\n") == 1
    argv = shlex.split(out)
    assert argv[:8] == [
        "env", "SLURM_CPU_BIND=cores", "NCCL_SOCKET_IFNAME=hsn",
        "NCCL_CROSS_NIC=1", "NCCL_NET_GDR_LEVEL=PHB", "FI_CXI_DISABLE_HOST_REGISTER=1",
        "FI_MR_CACHE_MONITOR=userfaultfd", "srun",
    ]  # fmt: skip
    assert argv[8:10] == ["--mpi=pmi2", "--kill-on-bad-exit=1"]  # the allocation is made
    # everything after `--` belongs to the script, even options of ours; the `--` is dropped
    assert argv[-len(HOSTILE) - 2 :] == ["python", "train.py", *HOSTILE]
    assert err == (
        "hvd-container: warning: shifter runs only images its gateway has pulled: run "
        "`shifterimg pull docker:u/img:tag` on a login node before the job (doctor there "
        "checks it)\n"
    )


def test_dry_run_inside_an_allocation(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    code, out, _ = run(
        capsys, "--site", "neuron", "--image", "x.sif", "-n", "8", "--dry-run", "train.py"
    )
    assert code == 0
    assert out == "srun --kill-on-bad-exit=1 -n 8 singularity exec --nv x.sif python train.py\n"


def test_site_from_env_var(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HVD_CONTAINER_SITE", "zih-alpha")
    code, out, _ = run(capsys, "--image", "x.sif", "-n", "8", "--dry-run", "t.py")
    assert code == 0 and "--partition=alpha" in out


def test_warnings_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys,
        "--site",
        "neuron",
        "--image",
        "x.sif",
        "-n",
        "8",
        "--comment",
        "field=ai;appl=pytorch",
        "--ntasks-per-node",
        "16",
        "--dry-run",
        "t.py",
    )
    assert code == 0
    assert "\n#SBATCH --comment=field=ai;appl=pytorch\n" in out
    assert err.startswith("hvd-container: warning: --ntasks-per-node 16 puts 16 ranks on a node")


def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    script = write(tmp_path / "pl.py", "import lightning\n")
    code, out, err = run(
        capsys,
        "--site",
        "neuron",
        "--image",
        "x.sif",
        "-n",
        "8",
        "--comment",
        "field=ai;appl=pytorch",
        "--dry-run",
        str(script),
    )
    assert code == 2 and out == ""
    assert (
        err
        == f"hvd-container: error: {script} uses PyTorch Lightning, which refuses srun -n/--ntasks: use -N 1 --ntasks-per-node 8 instead of -n 8\n"
    )


def test_bad_env_and_controller(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "--site", "local", "--image", "i", "-e", "NOVALUE", "--dry-run", "t.py"
    )
    assert code == 2 and err == (
        "hvd-container: error: --env: expected NAME=VALUE, got 'NOVALUE' (-e/--env sets a "
        "variable; the job's error file is --job-error)\n"
    )
    code, _, err = run(
        capsys, "--site", "local", "--image", "i", "--controller", "nccl", "--dry-run", "t.py"
    )
    assert (
        code == 2
        and err
        == "hvd-container: error: --controller: 'nccl' is not allowed (allowed: mpi, gloo, lightning, torch, torchrun)\n"
    )


def test_unknown_site(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--site", "mars", "--image", "i", "--dry-run", "t.py")
    assert (
        code == 2
        and "unknown site 'mars' (allowed: cscs-clariden, cscs-daint, jupiter, juwels-booster, local, neuron"
        in err
    )


def test_recipe_names_the_image_and_is_checked(
    capsys: pytest.CaptureFixture[str], in_job_dir: Path
) -> None:
    code, out, err = run(
        capsys, "--site", "local", "--recipe", "cpu-bookworm", "-n", "2", "--controller", "mpi",
        "--dry-run", "t.py",
    )  # fmt: skip
    assert code == 0
    assert out.endswith(" cpu-bookworm_1.sif -- /opt/venv/bin/python t.py\nHVD_CONTAINER_SCRIPT\n")
    # the image the template names is checked, not only --image
    assert err == (
        "hvd-container: warning: image of recipe cpu-bookworm (site local's images.template) "
        "cpu-bookworm_1.sif: no such file or directory (make it with `hvd-container build` then "
        "`hvd-container convert --to sif`); a launch on this machine would refuse it\n"
    )
    code, _, err = run(
        capsys, "--site", "zih-ml", "--recipe", "cpu-bookworm", "-n", "6", "--dry-run", "t.py"
    )
    assert code == 2 and "is built for amd64 but site zih-ml runs ppc64le" in err


def test_env_and_binds_from_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "--site", "zih-alpha", "--runtime", "apptainer", "--image", "x.sif", "-n", "8",
        "-e", "NCCL_DEBUG=INFO", "-B", "/data:/data:ro", "--workdir", "/data", "--dry-run", "t.py",
    )  # fmt: skip
    assert code == 0
    assert "\nexport NCCL_DEBUG=INFO\n" in out  # the submitted script sets it for srun
    assert "apptainer exec --nv -B /data:/data:ro --pwd /data x.sif python t.py" in out


def test_without_dry_run_the_executor_runs_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hvd_container.launcher.run import commands

    calls = []

    def fake_execute(launch, reporter, **options):  # type: ignore[no-untyped-def]
        calls.append((launch.site.name, launch.request.script, launch.request.args,
                      launch.request.ntasks))  # fmt: skip
        return 3

    monkeypatch.setattr(commands, "execute", fake_execute)
    code, out, _ = run(capsys, "--site", "zih-alpha", "--image", "x.sif", "-n", "8", "t.py", "a b")
    assert code == 3 and out == ""
    assert calls == [("zih-alpha", "t.py", ["a b"], 8)]


def modules_after_a_dry_run(*recipe: str) -> list[str]:
    """The modules a fresh interpreter holds after a dry run through the CLI."""
    code = (
        "import sys\n"
        "from hvd_container.cli.app import main\n"
        f"rc = main(['run', '--site', 'neuron', '--image', 'x.sif', '-n', '8', '--comment', 'field=ai;appl=pytorch', *{list(recipe)!r}, '--dry-run', 't.py'])\n"
        "print(rc, *sorted(sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    code_, *modules = done.stdout.splitlines()[-1].split()
    assert code_ == "0", done.stdout
    return modules


# what a launch never needs: the build side's engine client and converters
HEAVY = ("docker", "requests", "spython")


def build_side(modules: list[str]) -> list[str]:
    """The build side's modules among `modules`, but the readers of SIF files and the engine
    interface (its backend, which loads the Docker SDK, only once an engine is opened)."""
    return [
        m for m in modules
        if m.startswith("hvd_container.containers.")
        and m.split(".")[:3] != ["hvd_container", "containers", "sif"]
        and m != "hvd_container.containers.engine"
    ]  # fmt: skip


def test_dry_run_does_not_import_heavy_libraries() -> None:
    loaded = modules_after_a_dry_run()
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []
    assert build_side(loaded) == []
    # --recipe reads the recipe (its model), still without the engine's client
    with_recipe = modules_after_a_dry_run("--recipe", "cpu-bookworm")
    assert "hvd_container.containers.recipe" in with_recipe
    assert [m for m in with_recipe if m.split(".")[0] in HEAVY] == []


def test_the_cli_loads_only_the_run_command_module() -> None:
    loaded = modules_after_a_dry_run()
    assert [m for m in loaded if m.startswith("hvd_container.cli.commands.")] == [
        "hvd_container.cli.commands.launch_options",
        "hvd_container.cli.commands.run",
    ]


def test_a_count_spelled_with_an_equals_sign_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--site", "neuron", "-n=8", "--dry-run", "t.py")
    assert code == 2 and out == ""
    assert "--ntasks/-n: '=8' is not a valid int" in err


def test_a_reader_that_went_away_is_exit_1_without_a_traceback() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    done = subprocess.run(
        [sys.executable, "-m", "hvd_container", "run", "--site", "perlmutter", "--image", "u/i:t",
         "--account", "m_g", "--controller", "mpi", "--dry-run", "t.py"],
        stdout=write_end, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(write_end)
    assert done.returncode == 1
    assert all(line.startswith("hvd-container: warning: ") for line in done.stderr.splitlines())


def test_lightning_recipe_with_a_script_only_on_the_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    remote = "/scratch/alice/pl_train.py"
    code, out, err = run(capsys, "--site", "neuron", "--recipe", "lightning-pt113",
                         "--comment", "field=ai;appl=pytorch", "-n", "8", "--dry-run", remote)  # fmt: skip
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"hvd-container: error: {remote} (not readable here; recipe lightning-pt113 has Lightning and no Horovod) uses PyTorch Lightning")  # fmt: skip
    code = main(["batch", "--site", "neuron", "--recipe", "lightning-pt113", "--comment",
                 "field=ai;appl=pytorch", "-N", "2", "--ntasks-per-node", "4", remote])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "#SBATCH --job-name=pl_train" in out.splitlines()
    assert (
        out.rstrip()
        .splitlines()[-1]
        .startswith(
            "srun --kill-on-bad-exit=1 --job-name=pl_train -N 2 --ntasks-per-node=4 --cpus-per-task=4 singularity exec --nv "
        )
    )


def test_outside_an_allocation_the_dry_run_prints_what_is_submitted(
    capsys: pytest.CaptureFixture[str], in_job_dir: Path
) -> None:
    """The sbatch command with its script as a here-document: the script `batch` writes."""
    argv = ["--site", "perlmutter", "--image", "u/img:tag", "-n", "8", "--account", "m1_g",
            "--controller", "mpi", "train.py", "--", *HOSTILE]  # fmt: skip
    code, out, err = run(capsys, "--dry-run", *argv)
    assert code == 0, err
    first, _, rest = out.partition("\n")
    assert first == f"sbatch --parsable --chdir={in_job_dir} <<'HVD_CONTAINER_SCRIPT'"
    assert rest.endswith("\nHVD_CONTAINER_SCRIPT\n")
    assert main(["batch", *argv]) == 0
    assert capsys.readouterr().out == rest.removesuffix("HVD_CONTAINER_SCRIPT\n")
    done = subprocess.run(["bash", "-n"], input=out, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr  # the whole of it is valid shell


@pytest.mark.parametrize(
    ("command", "after", "flag"),
    [
        ("run", ["--dry-run"], "--dry-run"),  # would submit for real
        ("run", ["--epochs", "3", "--site=perlmutter"], "--site"),
        ("batch", ["--submit"], "--submit"),
        ("batch", ["--output", "job.sh"], "--output"),
    ],
)
def test_an_option_of_ours_after_the_script_is_refused_with_the_fix(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    after: list[str],
    flag: str,
) -> None:
    monkeypatch.setattr("hvd_container.launcher.run.commands.run", _never)
    monkeypatch.setattr("hvd_container.launcher.run.commands.submit", _never)
    code = main([command, "--site", "local", "--image", "x.sif", "train.py", *after])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    given = next(a for a in after if a.split("=")[0] == flag)
    assert err == (
        f"hvd-container: error: {flag} after the script train.py would go to the script, not "
        f"to `hvd-container {command}`: put it before train.py, or write "
        f"`train.py -- {given}` to pass it on to the script\n"
    )


def _never(*_args: object, **_kw: object) -> None:
    raise AssertionError("nothing may run or be submitted")


def test_after_a_double_dash_options_of_ours_are_the_scripts_and_short_ones_always(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    argv = ["--site", "neuron", "--image", "x.sif", "-n", "8", "--dry-run", "train.py"]
    code, out, err = run(capsys, *argv, "-n", "3", "-o", "out", "--", "--dry-run", "--", "x")
    assert code == 0, err
    # the first `--` is dropped; a later one is the script's own
    assert shlex.split(out)[-9:] == [
        "python", "train.py", "-n", "3", "-o", "out", "--dry-run", "--", "x"
    ]  # fmt: skip


def test_a_missing_image_in_the_sites_own_folder_is_checked_there_not_built(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Neuron's profile points at its NGC folder: off the site, such an --image was told to
    be made with `hvd-container build`."""
    ngc = "/apps/applications/singularity_images/ngc"
    code, _, err = run(
        capsys, "--site", "neuron", "--image", f"{ngc}/pytorch:25.12-py3.sif", "-N", "1",
        "--ntasks-per-node", "2", "--comment", "field=x;appl=pytorch", "--controller", "mpi",
        "--dry-run", "t.py",
    )  # fmt: skip
    assert code == 0, err
    assert err.splitlines()[0] == (
        f"hvd-container: warning: --image {ngc}/pytorch:25.12-py3.sif: not on this machine; "
        f"it is one of site neuron's own images ({ngc}), checked on neuron's login node: "
        f"`ls {ngc}` there lists them; a launch on this machine would refuse it"
    )
    assert "hvd-container build" not in err


def test_doctor_says_an_exclude_file_it_could_not_write_before_screening(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    isolated: Path,  # noqa: F811
) -> None:
    """The screen takes minutes on every node: a file in a missing folder is said first."""
    target = f"{tmp_path}/missing/bad.exclude"
    code = main(
        ["doctor", "--site", "local", "--image", "x.sif", "--screen", "--exclude-file", target]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        f"hvd-container: error: --exclude-file {target}: directory {tmp_path}/missing does not exist\n"
    )
