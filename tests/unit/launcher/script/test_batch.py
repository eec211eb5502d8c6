"""sbatch scripts per shipped site (golden files); the script really runs the same srun line.

Regenerate the golden files after an intended change with
`UPDATE_GOLDEN=1 python -m pytest tests/unit/launcher/script/test_batch.py` and review the diff.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _launch_helpers import GOLDEN, check_golden, isolated, job_dir, plan_launch, write  # noqa: F401
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import list_sites, load_site

from hvd_container.core.errors import UserError
from hvd_container.facts import ImageFacts

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    # the Lightning batch job of the Neuron guide
    "neuron": (
        "neuron",
        dict(
            script="pt_bert_nsmc_lightning.py",
            args=["--num_nodes", "2"],
            image="/scratch/u/pl.sif",
            nodes=2,
            ntasks_per_node=8,
            comment="field=ai;appl=pytorch",
            time="24:00:00",
            job_name="pytorch_lightning",
            controller="lightning",
        ),
    ),
    # the Horovod batch job of the Perlmutter guide, in a Shifter image
    "perlmutter": (
        "perlmutter",
        dict(
            script="tf_keras_fashion_mnist.py",
            image="docker:u/hvd:tf2.10",
            nodes=2,
            ntasks_per_node=4,
            account="dasrepo_g",
            time="2:00:00",
        ),
    ),
    "zih-alpha": ("zih-alpha", dict(image="hvd.sif", ntasks=16, time="08:00:00")),
    "zih-capella": ("zih-capella", dict(image="hvd.sif", ntasks=8, time="24:00:00")),
    # torch.distributed: its helpers written once, named on a short srun line
    "zih-capella-torch": (
        "zih-capella",
        dict(image="ddp.sif", nodes=2, controller="torch", time="24:00:00"),
    ),
    # CSCS Alps: the script writes the EDF its srun line names
    "cscs-clariden-torch": (
        "cscs-clariden",
        dict(
            image="registry.example.org/team/ddp:1",
            nodes=2,
            controller="torch",
            time="12:00:00",
            account="a",
        ),
    ),
    "cscs-daint": (
        "cscs-daint",
        dict(
            image="/capstor/scratch/u/hvd.sqsh",
            nodes=2,
            ntasks_per_node=4,
            time="0:30:00",
            account="a",
            partition="debug",
        ),
    ),
    # JSC's GH200 machine: an arm64 image, 4 ranks a node over the first node's IB name
    "jupiter-torch": (
        "jupiter",
        dict(image="ddp-arm64.sif", nodes=4, controller="torch", time="12:00:00", account="proj"),
    ),
    "juwels-booster-torch": (
        "juwels-booster",
        dict(
            image="ddp.sif",
            nodes=2,
            controller="torch",
            time="2:00:00",
            account="proj",
            partition="develbooster",
        ),
    ),
    "zih-ml": (
        "zih-ml",
        dict(image="hvd-ppc64le.sif", nodes=1, ntasks_per_node=6, time="08:00:00"),
    ),
    "local": (
        "local",
        dict(
            facts=ImageFacts(
                source="recipe cpu", name="cpu", version="1", arch="amd64", mpi_pmi=("pmix",)
            ),
            nodes=2,
            ntasks_per_node=1,
            env={"HOROVOD_LOG_LEVEL": "info"},
        ),
    ),
}


# Every script below is planned from the same working directory, as user u.
pytestmark = pytest.mark.usefixtures("job_dir")


def render_batch_plan(site: Any, request: LaunchRequest) -> tuple[str, list[str]]:
    planned = plan_launch(site, request, "batch")
    return planned.script, planned.warnings


def render_batch(site: Any, request: LaunchRequest) -> str:
    return render_batch_plan(site, request)[0]


def request(fields: dict[str, Any]) -> LaunchRequest:
    return LaunchRequest(**{"script": "train.py", **fields})


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_batch_script(name: str) -> None:
    site, fields = CASES[name]
    check_golden(f"batch-{name}.sh", render_batch(load_site(site), request(fields)))


def test_every_shipped_site_has_a_batch_case() -> None:
    assert {site for site, _ in CASES.values()} == set(list_sites())
    assert {p.name for p in GOLDEN.glob("batch-*.sh")} == {f"batch-{n}.sh" for n in CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_batch_script_runs_the_same_srun_line(name: str, tmp_path: Path) -> None:
    """bash runs the script; recorders named srun and module write what they received."""
    site_name, fields = CASES[name]
    site = load_site(site_name)
    req = request({**fields, "args": [*fields.get("args", []), "a b", "$HOME", "it's"]})
    script = write(tmp_path / "job.sh", render_batch(site, req))
    bindir = tmp_path / "bin"
    for tool in ("srun", "module"):
        out = shlex.quote(str(tmp_path / f"{tool}.argv"))
        recorder = write(
            bindir / tool,
            f'#!/bin/sh\nfor a in "$@"; do printf \'%s\\0\' "$a"; done > {out}\nenv > {out}.env\n',
        )
        recorder.chmod(0o755)
    done = subprocess.run(
        ["bash", str(script)],
        env={"PATH": f"{bindir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    # the step of the one plan whose allocation the #SBATCH lines ask for
    plan = plan_launch(site, LaunchRequest(**{**req.__dict__, "inside_allocation": False}))
    received = (tmp_path / "srun.argv").read_bytes().split(b"\0")[:-1]
    assert [a.decode() for a in received] == plan.step[plan.step.index("srun") + 1 :]
    sbatch = [
        line.split(None, 1)[1]
        for line in script.read_text().splitlines()
        if line.startswith("#SBATCH ")
    ]
    assert sbatch[: len(plan.allocation)] == plan.allocation
    env_lines = (tmp_path / "srun.argv.env").read_text().splitlines()
    for key, value in plan.env.items():
        assert f"{key}={value}" in env_lines
    if site.modules:
        modules = (tmp_path / "module.argv").read_bytes().split(b"\0")[:-1]
        assert [m.decode() for m in modules] == ["load", *site.modules]


def test_sbatch_lines_carry_the_allocation() -> None:
    text = render_batch(load_site("perlmutter"), request(CASES["perlmutter"][1]))
    lines = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert lines == [
        "#SBATCH --job-name=tf_keras_fashion_mnist",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=4",
        "#SBATCH --gpus-per-node=4",
        "#SBATCH --cpus-per-task=32",
        "#SBATCH --account=dasrepo_g",
        "#SBATCH --qos=regular",
        "#SBATCH --constraint=gpu",
        "#SBATCH --time=2:00:00",
        "#SBATCH --output=%x_%j.out",
        "#SBATCH --error=%x_%j.err",
        "#SBATCH --no-requeue",
        # Shifter's image and modules in the header, as NERSC's job scripts give them
        "#SBATCH --image=docker:u/hvd:tf2.10",
        "#SBATCH --module=gpu,nccl-plugin,mpich",
    ]
    assert "export SLURM_CPU_BIND=cores" in text.splitlines()
    srun = text.rstrip().splitlines()[-1]
    # srun reads no SLURM_CPUS_PER_TASK since Slurm 22.05: the step says its CPUs itself
    assert srun.startswith(
        "srun --mpi=pmi2 --kill-on-bad-exit=1 -N 2 --ntasks-per-node=4 --cpus-per-task=32 shifter --module=gpu,nccl-plugin,mpich "
    )
    assert "--account" not in srun  # the allocation is the job's, not the step's


def test_batch_checks_the_same_pitfalls() -> None:
    with pytest.raises(UserError, match="and requires it"):
        render_batch(load_site("neuron"), request(dict(image="x.sif", ntasks=8)))
    with pytest.raises(UserError, match="refuses srun -n"):
        render_batch(
            load_site("neuron"),
            request(
                dict(
                    image="x.sif", ntasks=8, comment="field=ai;appl=pytorch", controller="lightning"
                )
            ),
        )


def test_batch_warnings_are_reported_once() -> None:
    _text, warnings = render_batch_plan(
        load_site("neuron"),
        request(
            dict(image="x.sif", ntasks=16, ntasks_per_node=16, comment="field=ai;appl=pytorch")
        ),
    )
    assert sum("puts 16 ranks on a node" in w for w in warnings) == 1


@pytest.mark.parametrize(
    "value, written",
    [
        ("my job", '"my job"'),
        ("run#2", '"run#2"'),
        ("it's", '"it\'s"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("field=ai;appl=pytorch", "field=ai;appl=pytorch"),
        ("%x_%j.out", "%x_%j.out"),
    ],
)
def test_sbatch_values_are_written_so_that_sbatch_reads_them_back(value: str, written: str) -> None:
    """sbatch's own reading is the oracle: tests/e2e/test_sbatch_values.py submits them."""
    text = render_batch(
        load_site("zih-alpha"), request(dict(image="x.sif", ntasks=8, job_name=value))
    )
    assert f"#SBATCH --job-name={written}\n" in text


def test_a_value_that_is_not_utf8_is_one_line() -> None:
    with pytest.raises(UserError, match=r"^-J/--job-name: 'run\\udcff' is not UTF-8 text"):
        render_batch(
            load_site("zih-alpha"), request(dict(image="x.sif", ntasks=8, job_name="run\udcff"))
        )


def test_render_is_pure() -> None:
    site, fields = CASES["zih-alpha"]
    first = render_batch(load_site(site), request(fields))
    assert render_batch(load_site(site), request(fields)) == first


def test_every_srun_says_its_cpus_per_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm 22.05's release notes: srun no longer reads SLURM_CPUS_PER_TASK, so a step
    without -c gets one CPU per task whatever the allocation asked for."""
    site = load_site("perlmutter")
    req = request(CASES["perlmutter"][1])
    planned = plan_launch(site, req, "batch")
    assert "--cpus-per-task=32" in planned.allocation and "--cpus-per-task=32" in planned.step
    # inside an allocation, the step takes the allocation's CPUs per task from the environment
    from hvd_container.launcher.plan.request import LaunchOptions, request_from_options

    monkeypatch.setenv("SLURM_JOB_ID", "5")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "16")
    _site, inside = request_from_options(
        "t.py", options=LaunchOptions(site="perlmutter", image="u/i:t", ntasks="4")
    )
    assert inside.inside_allocation and "--cpus-per-task=16" in plan_launch(site, inside).argv
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    _site, bare = request_from_options(
        "t.py", options=LaunchOptions(site="perlmutter", image="u/i:t", ntasks="4")
    )
    assert not any(a.startswith("--cpus-per-task") for a in plan_launch(site, bare).argv)
