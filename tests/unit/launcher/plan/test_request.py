"""launcher/plan/request.py: the launch parameters, the typed object the CLI hands the library,
and the request made from it."""

from __future__ import annotations

import dataclasses

import pytest
from hvd_container.launcher.plan.request import (
    OPTIONS,
    LaunchOptions,
    LaunchRequest,
    request_from_options,
)
from hvd_container.launcher.plan.scheduler_values import SchedulerValues


def test_each_launch_parameter_is_declared_once_on_the_request() -> None:
    """OPTIONS, the options object and the request's parameters are one declaration: the
    request's fields made with `param`, in their order, after the site."""
    declared = [f.name for f in dataclasses.fields(LaunchRequest) if "option" in f.metadata]
    assert list(OPTIONS) == ["site", *declared]
    assert list(LaunchOptions()) == list(OPTIONS)
    flags = [flag for option in OPTIONS.values() for flag in option.flags]
    assert len(flags) == len(set(flags))
    # the scheduler values a launch resolves once fall back to the profile keys declared here
    for name in (f.name for f in dataclasses.fields(SchedulerValues)):
        assert OPTIONS[name].site_key == f"scheduler.{name}", name


def test_a_misspelt_parameter_is_refused_where_it_is_made() -> None:
    with pytest.raises(TypeError, match="not a launch parameter: ntask"):
        LaunchOptions(ntask=8)


def test_the_request_reads_the_options_and_leaves_them_as_given() -> None:
    given = LaunchOptions(site="local", ntasks="4", env=["A=1"], binds=("/data",))
    _site, request = request_from_options("t.py", ["--epochs", "3"], given)
    assert (request.ntasks, request.env, request.binds) == (4, {"A": "1"}, ["/data"])
    assert request.args == ["--epochs", "3"]
    assert given == LaunchOptions(site="local", ntasks="4", env=["A=1"], binds=("/data",))
    with pytest.raises(TypeError):
        given["ntasks"] = 8  # type: ignore[index]
    with pytest.raises(AttributeError):
        given.ntasks = 8  # type: ignore[attr-defined]


def test_scheduler_options_pass_through_to_the_script_and_the_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.unit._launch_helpers import plan_launch

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    given = LaunchOptions(
        site="local", image="x.sif", nodes="2",
        sbatch_options=["--hint=nomultithread", "--exclusive", "--mail-type=END,FAIL"],
        srun_options=["--mem-bind=local", "-K0"],
    )  # fmt: skip
    site, request = request_from_options("train.py", [], given)
    plan = plan_launch(site, request)
    assert plan.script is not None
    lines = plan.script.splitlines()
    sbatch = [line for line in lines if line.startswith("#SBATCH ")]
    assert sbatch[-3:] == [
        "#SBATCH --hint=nomultithread",
        "#SBATCH --exclusive",
        "#SBATCH --mail-type=END,FAIL",
    ]
    # after the site's srun options, and -K0 chosen by the user replaces the tool's default
    assert plan.step[:4] == ["srun", "--mpi=pmix", "--mem-bind=local", "-K0"]
    assert "--kill-on-bad-exit=1" not in plan.step
    from hvd_container.launcher.plan.planner import plan as make_plan

    salloc = make_plan(site, request, "run", dry_run=True, salloc=True)
    assert salloc.argv[0] == "salloc" and {"--hint=nomultithread", "--exclusive"} <= set(
        salloc.argv
    )
    assert salloc.argv.index("--exclusive") < salloc.argv.index("srun")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--sbatch-option=--time=100:00:00",
         "--sbatch-option '--time=100:00:00': --time is set by the tool: use its -t/--time"),
        ("--sbatch-option=--part=gpu",  # getopt's abbreviation of --partition
         "--sbatch-option '--part=gpu': --partition is set by the tool: use its -p/--partition"),
        ("--srun-option=-N4", "--srun-option '-N4': --nodes is set by the tool: use its -N/--nodes"),
        ("--sbatch-option=--mem=64G",
         "--sbatch-option '--mem=64G': --mem is set by the tool: use its --mem (a profile: scheduler.memory)"),
        ("--sbatch-option=--mem-per-cpu=3G",  # Slurm refuses it beside the tool's --mem
         "--sbatch-option '--mem-per-cpu=3G': --mem-per-cpu is set by the tool: use its --mem or --mem-per-gpu"),
        ("--sbatch-option=--output=/tmp/x",
         "--sbatch-option '--output=/tmp/x': --output is set by the tool: use its --job-output"),
        ("--srun-option=--wrap=id", "--srun-option '--wrap=id': srun has no option --wrap (Slurm "),
        ("--sbatch-option=--wrap=id", "--sbatch-option '--wrap=id': sbatch reads --wrap, which is "
         "not allowed here (allowed: options on resources and placement"),
        ("--srun-option=--export=ALL", "--srun-option '--export=ALL': srun reads --export, which is not allowed here"),
        ("--srun-option=-ED/dir", "--srun-option '-ED/dir': srun reads --preserve-env, which is not allowed here"),
        ("--srun-option=-uD/dir", "--srun-option '-uD/dir': srun reads --chdir, which is not allowed here"),
        ("--srun-option=--nodelist", "--srun-option '--nodelist': --nodelist takes a value: write --nodelist=VALUE"),
        ("--sbatch-option=--mail-type=END, FAIL",
         "--sbatch-option '--mail-type=END, FAIL': an #SBATCH option has no spaces (--mail-type=END,FAIL)"),
        ("--sbatch-option=mem=4G", "--sbatch-option 'mem=4G': give one option, such as --exclusive or --mail-type=END"),
        ("--sbatch-option=--mem=1G\n#SBATCH --uid=0", "--sbatch-option '--mem=1G\\n#SBATCH --uid=0': give one option"),
    ],
)  # fmt: skip
def test_a_pass_through_option_is_refused_where_a_flag_or_a_rule_covers_it(
    option: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from hvd_container.cli.app import main

    argv = ["run", "--site", "local", "--image", "x.sif", "-N", "2", option, "--dry-run", "t.py"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hvd-container: error: {message}"), err
    assert err.count("\n") == 1


def test_inside_an_allocation_sbatch_options_are_said_to_be_unused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.unit._launch_helpers import plan_launch

    monkeypatch.setenv("SLURM_JOB_ID", "7")
    site, request = request_from_options(
        "t.py", [], LaunchOptions(site="local", image="x.sif", sbatch_options=["--exclusive"])
    )
    plan = plan_launch(site, request)
    assert "--exclusive" not in plan.argv
    assert any(
        n.startswith("--sbatch-option --exclusive: not used inside an allocation")
        for n in plan.notes
    )


@pytest.mark.parametrize(
    ("program", "instead"),
    [
        (["torchrun", "--nproc_per_node", "4", "multinode.py", "50", "10"],
         "`hvd-container run ... --controller torchrun multinode.py 50 10`"),
        (["python", "-m", "torch.distributed.run", "--nproc_per_node=4", "t.py"],
         "--controller torchrun t.py`"),
        (["python3.11", "-mtorch.distributed.launch", "t.py"], "--controller torchrun t.py`"),
        (["/usr/bin/accelerate", "launch", "t.py", "--lr", "1"], "--controller torch t.py --lr 1`"),
        (["horovodrun", "-np", "8", "python", "t.py"], "--controller mpi t.py`"),
        (["mpirun", "-n", "8", "python", "t.py"], "--controller mpi t.py`"),
        (["srun", "python", "t.py"], "`hvd-container run ... t.py`"),
        (["torchrun", "t.py", "a\nb"], "--controller torchrun t.py 'a?b'`"),
    ],
)  # fmt: skip
def test_a_launcher_given_as_the_program_is_refused_with_what_to_write(
    program: list[str], instead: str
) -> None:
    from hvd_container.launcher.plan.request import launcher_as_program

    why = launcher_as_program(program[0], program[1:])
    assert why is not None and why.endswith(instead) and "\n" not in why, why
    assert "is a launcher: as the program, each of the job's ranks would start" in why


@pytest.mark.parametrize(
    "program",
    [["python", "t.py"], ["python", "-c", "print(1)"], ["python", "-m", "mypkg.train"],
     ["accelerate", "config"], ["srun_helper.py"], ["train.py", "torchrun"]],
)  # fmt: skip
def test_other_programs_are_not_launchers(program: list[str]) -> None:
    from hvd_container.launcher.plan.request import launcher_as_program

    assert launcher_as_program(program[0], program[1:]) is None


def test_sbatch_s_e_for_the_error_file_points_to_job_error() -> None:
    from hvd_container.launcher.plan.request import parse_env

    from hvd_container.core.errors import UserError

    with pytest.raises(
        UserError,
        match=r"^--env: expected NAME=VALUE, got 'err.txt' \(-e/--env sets a variable; the job's error file is --job-error\)$",
    ):
        parse_env(["err.txt"])
    with pytest.raises(UserError, match=r"^--env: expected NAME=VALUE, got '=x'$"):
        parse_env(["=x"])
