"""srun lines per shipped site and runtime (golden files), the guides' own lines, quoting.

Regenerate the golden files after an intended change with
`UPDATE_GOLDEN=1 python -m pytest tests/unit/launcher/plan/test_plan.py` and review the diff.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _launch_helpers import (  # noqa: F401
    GOLDEN,
    check_golden,
    compose_srun,
    isolated,
    job_dir,
    plan_launch,
    words,
    write,
)
from hvd_container.launcher import runtimes
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import load_site

from hvd_container.core.errors import UserError
from hvd_container.facts import ImageFacts

NGC = "/apps/applications/singularity_images/ngc/pytorch_22.03-hd-py3.sif"
QUALIS = "qualis2006/tensorflow-pytorch-horovod:tf2.10_pt1.13"
FACTS = ImageFacts(
    source="recipe demo",
    name="demo",
    version="1.0",
    arch="amd64",
    mpi_pmi=("pmix", "pmi2"),
    controllers=("mpi", "gloo"),
)

# name -> (site, LaunchRequest fields)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "neuron-in-allocation": ("neuron", dict(image=NGC, ntasks=8, inside_allocation=True)),
    "neuron-standalone": (
        "neuron",
        dict(image="hvd.sif", ntasks=16, comment="field=ai;appl=pytorch"),
    ),
    "neuron-partition": (
        "neuron",
        dict(
            image="hvd.sif",
            nodes=2,
            ntasks_per_node=2,
            partition="cas_v100_2",
            comment="field=ai;appl=pytorch",
            time="2:00:00",
        ),
    ),
    "neuron-lightning": (
        "neuron",
        dict(
            script="pytorch_mnist_lightning.py",
            args=["--num_nodes", "2"],
            runtime="none",
            nodes=2,
            ntasks_per_node=4,
            controller="lightning",
            inside_allocation=True,
        ),
    ),
    "neuron-lightning-standalone": (
        "neuron",
        dict(
            image="pl.sif",
            nodes=2,
            ntasks_per_node=4,
            controller="lightning",
            comment="field=ai;appl=pytorch",
        ),
    ),
    "neuron-apptainer": (
        "neuron",
        dict(
            image="hvd.sif",
            runtime="apptainer",
            ntasks=8,
            binds=["/scratch/u", "/data:/data:ro"],
            workdir="/scratch/u/run",
            env={"NCCL_DEBUG": "INFO"},
            inside_allocation=True,
        ),
    ),
    "neuron-docker-ref": (
        "neuron",
        # one rank: more would each convert the registry image at once (refused, see below)
        dict(image="docker:user/img:tag", ntasks=1, inside_allocation=True),
    ),
    "perlmutter-in-allocation": (
        "perlmutter",
        dict(script="tf_keras_cats_dogs.py", image=QUALIS, ntasks=8, inside_allocation=True),
    ),
    "perlmutter-standalone": (
        "perlmutter",
        dict(
            image="docker:u/img:tag", nodes=2, ntasks_per_node=4, account="m1234_g", time="02:00:00"
        ),
    ),
    "perlmutter-extra-module": (
        "perlmutter",
        dict(
            image="u/img:tag",
            ntasks=4,
            modules=["mpich"],
            binds=["/pscratch/u:/data"],
            inside_allocation=True,
        ),
    ),
    "perlmutter-podman-hpc": (
        "perlmutter",
        dict(
            image="docker:u/img:tag",
            runtime="podman-hpc",
            ntasks=8,
            binds=["/pscratch/u/data:/data"],
            workdir="/data",
            inside_allocation=True,
        ),
    ),
    "perlmutter-gpus-per-task": (
        "perlmutter",
        dict(image="u/img:tag", nodes=2, ntasks_per_node=4, gpus_per_task=1, account="m1234_g"),
    ),
    "zih-alpha-standalone": ("zih-alpha", dict(image="hvd.sif", ntasks=16)),
    "zih-capella": ("zih-capella", dict(image="hvd.sif", nodes=2, ntasks_per_node=4)),
    # --controller torch on every site and runtime: the rendezvous wrapper around the runtime,
    # its variables passed in (podman-hpc by name)
    "local-torch": ("local", dict(image="i.sqfs", controller="torch", nodes=2, ntasks_per_node=1)),
    "local-torchrun": (
        "local",
        dict(image="i.sqfs", controller="torchrun", nodes=2, ntasks_per_node=2),
    ),
    "neuron-torch": (
        "neuron",
        dict(image="hvd.sif", controller="torch", ntasks=16, comment="field=ai"),
    ),
    "perlmutter-torch": (
        "perlmutter",
        dict(image="u/img:tag", controller="torch", nodes=2, account="m1234_g"),
    ),
    "perlmutter-podman-hpc-torch": (
        "perlmutter",
        dict(
            image="u/img:tag", runtime="podman-hpc", controller="torch", nodes=2, account="m1234_g"
        ),
    ),
    "zih-alpha-torch": ("zih-alpha", dict(image="hvd.sif", controller="torch", nodes=2)),
    "zih-alpha-pyxis-torch": (
        "zih-alpha",
        dict(
            image="registry.example.org:5000/team/t:1", runtime="pyxis", controller="torch", nodes=2
        ),
    ),
    "zih-capella-torch": ("zih-capella", dict(image="hvd.sif", controller="torch", nodes=2)),
    # JSC: Apptainer with --nv, --gres=gpu:4, the rendezvous on the first node's IB name (i)
    "jupiter-torch": (
        "jupiter",
        dict(image="ddp-arm64.sif", controller="torch", nodes=2, account="proj"),
    ),
    # CSCS Alps: srun --environment=EDF, the EDF written by the launch
    "cscs-clariden-torch": (
        "cscs-clariden",
        dict(image="registry.example.org/team/ddp:1", controller="torch", nodes=2, account="a"),
    ),
    # CSCS's Sarus Suite: srun --edf=EDF (Skybox), the EDF written by the launch
    "cscs-clariden-sarus-suite": (
        "cscs-clariden",
        dict(
            image="registry.example.org/team/ddp:1",
            runtime="sarus-suite",
            controller="torch",
            nodes=2,
            account="a",
        ),
    ),
    "cscs-daint-horovod": (
        "cscs-daint",
        dict(
            image="/capstor/scratch/u/ddp.sqsh",
            nodes=2,
            ntasks_per_node=4,
            account="a",
            partition="debug",
            time="0:30:00",
        ),
    ),
    "juwels-booster-torchrun": (
        "juwels-booster",
        dict(image="ddp.sif", controller="torchrun", nodes=2, account="proj"),
    ),
    "zih-ml-torch": ("zih-ml", dict(image="hvd-ppc64le.sif", controller="torch", nodes=1)),
    "zih-alpha-pyxis": (
        "zih-alpha",
        dict(
            image="registry.example.org:5000/team/hvd:1.0",
            runtime="pyxis",
            nodes=2,
            ntasks_per_node=8,
            binds=["/projects/p:/data"],
            workdir="/data",
            env={"NCCL_DEBUG": "INFO"},
        ),
    ),
    "zih-alpha-program": (
        "zih-alpha",
        dict(
            script="./bin/train.sh",
            args=["--epochs", "3"],
            image="hvd.sif",
            ntasks=8,
            inside_allocation=True,
        ),
    ),
    "zih-ml-standalone": ("zih-ml", dict(image="hvd-ppc64le.sif", nodes=2, ntasks_per_node=6)),
    "zih-ml-recipe": (
        "zih-ml",
        dict(
            facts=ImageFacts(source="recipe p9", name="hvd-p9", version="2", arch="ppc64le"),
            ntasks=6,
        ),
    ),
    "local-in-allocation": (
        "local",
        dict(
            image="hvd.sqfs",
            ntasks=4,
            binds=["/tmp/data:/data"],
            workdir="/data",
            inside_allocation=True,
        ),
    ),
    "local-standalone": ("local", dict(facts=FACTS, nodes=2, ntasks_per_node=2)),
    "local-none": ("local", dict(runtime="none", ntasks=2)),
    "local-gloo": (
        "local",
        dict(image="hvd.sqfs", ntasks=2, mpi="none", controller="gloo", facts=FACTS),
    ),
}


# Every line below is planned from the same working directory, as user u.
pytestmark = pytest.mark.usefixtures("job_dir")


def plan(site: str, fields: dict[str, Any]):  # type: ignore[no-untyped-def]
    fields = {"script": "train.py", **fields}
    return plan_launch(load_site(site), LaunchRequest(**fields))


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_launch_line(name: str) -> None:
    site, fields = CASES[name]
    result = plan(site, fields)
    check_golden(f"{name}.txt", result.shell_line() + "\n")
    # torch's controllers run the srun line under the wrapper that finds the first node
    assert result.step[0] == "srun" or result.step[:2] == ["sh", "-c"] and "srun" in words(result)


def test_no_stale_golden_lines() -> None:
    on_disk = {p.name for p in GOLDEN.glob("*.txt")}
    assert on_disk == {f"{n}.txt" for n in CASES}


def test_every_site_and_runtime_has_a_case() -> None:
    sites = {site for site, _ in CASES.values()}
    assert sites == {
        "cscs-clariden", "cscs-daint", "jupiter", "juwels-booster", "local", "neuron",
        "perlmutter", "zih-alpha", "zih-capella", "zih-ml",
    }  # fmt: skip
    covered = {load_site(site).runtime_for(f.get("runtime")).kind for site, f in CASES.values()}
    # every runtime the tool knows (a new runtime's file is found by listing the folder)
    assert covered == set(runtimes.kinds())


# The lines the site guides show, reproduced from the built-in profiles.


def test_neuron_guide_line() -> None:
    """The tutorial's `srun -n 8 singularity run --nv x.sif python ...`, with `exec` as the
    site guide's examples that give a command have it now (run would start NGC's entrypoint)."""
    argv = compose_srun(
        load_site("neuron"),
        LaunchRequest(script="train_hvd.py", image=NGC, ntasks=8, inside_allocation=True),
    )
    assert (
        shlex.join(argv)
        == f"srun --kill-on-bad-exit=1 -n 8 singularity exec --nv {NGC} python train_hvd.py"
    )


def test_perlmutter_guide_line() -> None:
    script = "KISTI-DL-tutorial-using-horovod/src/tensorflow/tf_keras_cats_dogs.py"
    result = plan_launch(
        load_site("perlmutter"),
        LaunchRequest(script=script, image=QUALIS, ntasks=8, inside_allocation=True),
    )
    # the guide's line, with mpich named again: a --module list replaces Shifter's defaults
    assert shlex.join(words(result)) == (
        f"srun --mpi=pmi2 --kill-on-bad-exit=1 -n 8 shifter --module=gpu,nccl-plugin,mpich --image=docker:{QUALIS} python {script}"
    )
    assert result.env["SLURM_CPU_BIND"] == "cores"


def test_lightning_guide_line(tmp_path: Path) -> None:
    script = write(
        tmp_path / "pytorch_mnist_lightning.py",
        "import torch\nfrom lightning.pytorch import Trainer\n",
    )
    argv = compose_srun(
        load_site("neuron"),
        LaunchRequest(
            script=str(script),
            args=["--num_nodes", "2"],
            runtime="none",
            nodes=2,
            ntasks_per_node=4,
            inside_allocation=True,
        ),
    )
    assert shlex.join(argv) == (
        f"srun --kill-on-bad-exit=1 --job-name=pytorch_mnist_lightning -N 2 --ntasks-per-node=4 python {script} --num_nodes 2"
    )


def test_lightning_defaults_to_one_node_of_gpus(tmp_path: Path) -> None:
    script = write(tmp_path / "pl.py", "import pytorch_lightning as pl\n")
    result = plan("zih-alpha", dict(script=str(script), image="x.sif", inside_allocation=True))
    assert "-N 1 --ntasks-per-node=8" in result.shell_line()
    assert "-n" not in words(result)


# Hostile arguments survive quoting exactly.

HOSTILE = [
    "a b",
    "it's",
    'say "hi"',
    "x; rm -rf /",
    "$HOME",
    "${PATH}",
    "`id`",
    "$(id)",
    "",
    "-n",
    "--",
    "new\nline",
    "tab\there",
    "ü-ñ",
    "*",
    "a\\b",
    "&&",
    "|",
    ">out",
    "#not-a-comment",
    "~",
]


@pytest.mark.parametrize(
    ("site", "runtime"),
    [
        ("neuron", None),
        ("neuron", "apptainer"),
        ("perlmutter", None),
        ("perlmutter", "podman-hpc"),
        ("zih-alpha", "pyxis"),
        ("local", None),
        ("local", "none"),
    ],
)
def test_hostile_arguments_round_trip(site: str, runtime: str | None) -> None:
    result = plan(
        site,
        dict(
            script="my train.py",
            args=HOSTILE,
            # a registry image, except where Apptainer would convert it in every rank
            image="u/img:tag"
            if runtime not in (None, "none", "apptainer", "singularity") or site == "perlmutter"
            else "i.sif",
            runtime=runtime,
            ntasks=2,
            env={"WEIRD": "a b;$c 'd'"},
            inside_allocation=True,
        ),
    )
    line = result.shell_line()
    assert "\n" not in line.replace("'new\nline'", "")
    assert shlex.split(line) == result.command()
    assert result.step[-len(HOSTILE) :] == HOSTILE
    assert result.step[-len(HOSTILE) - 1] == "my train.py"


def test_printed_line_gives_back_the_argv_in_a_real_shell(tmp_path: Path) -> None:
    """Run the printed line with sh; a recorder named srun writes the argv it received."""
    bindir = tmp_path / "bin"
    record = tmp_path / "argv"
    recorder = write(
        bindir / "srun",
        f'#!/bin/sh\nfor a in "$@"; do printf \'%s\\0\' "$a"; done > {shlex.quote(str(record))}\n'
        f"printf '%s' \"$WEIRD\" > {shlex.quote(str(record))}.env\n",
    )
    recorder.chmod(0o755)
    result = plan(
        "perlmutter",
        dict(
            script="t.py",
            args=HOSTILE,
            image="u/i:t",
            ntasks=2,
            env={"WEIRD": "a b;$c 'd'"},
            inside_allocation=True,
        ),
    )
    done = subprocess.run(
        ["sh", "-c", result.shell_line()],
        env={"PATH": f"{bindir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    received = record.read_bytes().split(b"\0")[:-1]
    assert [a.decode() for a in received] == result.step[1:]
    assert Path(f"{record}.env").read_text() == "a b;$c 'd'"


# Details of each runtime's grammar.


def test_python_scripts_use_the_sites_python() -> None:
    assert plan("local", dict(image="i.sqfs", ntasks=1, inside_allocation=True)).step[-2:] == [
        "/opt/venv/bin/python",
        "train.py",
    ]
    program = plan(
        "zih-alpha", dict(script="run.sh", image="i.sif", ntasks=1, inside_allocation=True)
    )
    assert program.step[-1] == "run.sh"


@pytest.mark.parametrize(
    ("runtime", "image", "expected"),
    [
        ("apptainer", "user/img:tag", "docker://user/img:tag"),
        ("apptainer", "docker:user/img:tag", "docker://user/img:tag"),
        ("apptainer", "oras://ghcr.io/x/y:1", "oras://ghcr.io/x/y:1"),
        ("apptainer", "/scratch/x.sif", "/scratch/x.sif"),
        ("shifter", "user/img:tag", "--image=docker:user/img:tag"),
        ("shifter", "docker://user/img:tag", "--image=docker:user/img:tag"),
        ("podman-hpc", "docker:user/img:tag", "user/img:tag"),
        (
            "pyxis",
            "nvcr.io/nvidia/pytorch:22.03-py3",
            "--container-image=nvcr.io#nvidia/pytorch:22.03-py3",
        ),
        ("pyxis", "localhost:5000/hvd:1", "--container-image=localhost:5000#hvd:1"),
        ("pyxis", "user/img:tag", "--container-image=user/img:tag"),
        ("pyxis", "/scratch/img.sqsh", "--container-image=/scratch/img.sqsh"),
        ("charliecloud", "/var/tmp/img.sqfs", "/var/tmp/img.sqfs"),
    ],
)
def test_image_reference_per_runtime(runtime: str, image: str, expected: str) -> None:
    argv = plan(
        "zih-alpha", dict(image=image, runtime=runtime, ntasks=1, inside_allocation=True)
    ).argv
    assert expected in argv


def test_shifter_flags_come_before_the_command() -> None:
    argv = plan(
        "perlmutter",
        dict(
            image="u/i:t",
            ntasks=1,
            binds=["/a:/b"],
            workdir="/b",
            modules=["mpich"],
            inside_allocation=True,
        ),
    ).argv
    command_at = argv.index("python")
    flags = argv[argv.index("shifter") + 1 : command_at]
    assert flags == [
        "--module=gpu,nccl-plugin,mpich",
        "--image=docker:u/i:t",
        "--volume=/a:/b",
        "--workdir=/b",
    ]
    assert sum(a.startswith("--module") for a in argv) == 1


def test_podman_names_every_variable_it_must_pass() -> None:
    argv = plan(
        "perlmutter",
        dict(image="u/i:t", runtime="podman-hpc", ntasks=1, env={"X": "1"}, inside_allocation=True),
    ).argv
    assert argv[argv.index("podman-hpc") : argv.index("u/i:t")] == [
        # --nccl: the profile's, NERSC's NCCL and its network plugin
        "podman-hpc", "run", "--rm", "--gpu", "--mpi", "--nccl", "-v", "/home/u/job:/home/u/job",
        "-e", "SLURM_CPU_BIND", "-e", "NCCL_SOCKET_IFNAME",
        "-e", "NCCL_CROSS_NIC", "-e", "NCCL_NET_GDR_LEVEL", "-e", "FI_CXI_DISABLE_HOST_REGISTER",
        "-e", "FI_MR_CACHE_MONITOR", "-e", "X",
        # podman-hpc takes the user from $USER when there is no login terminal (a batch job)
        "-e", "USER",
        # what srun sets per task: rank, sizes, the PMI client's rendezvous
        "-e", "SLURM_*", "-e", "PMI_*", "-e", "PMIX_*",
        # it starts in the working directory it binds
        "-w", "/home/u/job",
    ]  # fmt: skip


def test_gpu_flags_only_when_gpus_are_requested() -> None:
    no_gpu = plan("local", dict(image="i.sqfs", ntasks=2, runtime="apptainer"))
    assert "--nv" not in words(no_gpu)
    assert not any(a.startswith(("--gres", "--gpus")) for a in words(no_gpu))


def test_charliecloud_separates_the_command() -> None:
    argv = plan(
        "local", dict(image="i.sqfs", ntasks=1, binds=["/d"], workdir="/d", inside_allocation=True)
    ).argv
    assert argv[argv.index("ch-run") :] == [
        "ch-run",
        "-b",
        "/d:/d",
        "-b",
        "/home/u/job:/home/u/job",
        "-c",
        "/d",
        "i.sqfs",
        "--",
        "/opt/venv/bin/python",
        "train.py",
    ]


def test_recipe_image_from_site_template_and_registry(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.yaml",
        "name: s\nruntime: {kind: shifter}\nimages: {registry: docker.io/me, template: '{name}:{version}'}\n",
    )
    result = plan_launch(load_site(str(path)), LaunchRequest(script="t.py", facts=FACTS, ntasks=1))
    # Shifter's own reference drops docker.io/ (as `convert --to shifter` pulls it)
    assert "--image=docker:me/demo:1.0" in words(result)
    assert result.image == "docker.io/me/demo:1.0"


def test_layout_defaults() -> None:
    # nothing asked: one rank per GPU of one node
    assert plan("perlmutter", dict(image="u/i:t", inside_allocation=True)).layout.ntasks == 4
    assert plan("local", dict(image="i.sqfs", inside_allocation=True)).layout.ntasks == 1
    # outside an allocation -n alone gets enough nodes for one GPU per rank
    layout = plan("zih-ml", dict(image="p.sif", ntasks=12)).layout
    assert (layout.nodes, layout.ntasks, layout.gpus_per_node) == (2, 12, 6)
    # -N with --ntasks-per-node, GPUs follow the ranks per node
    layout = plan(
        "neuron", dict(image="x.sif", nodes=2, ntasks_per_node=2, comment="field=ai;appl=pytorch")
    ).layout
    assert (layout.nodes, layout.ntasks_per_node, layout.gpus_per_node) == (2, 2, 2)
    # --ntasks-per-node alone means one node
    assert plan("zih-alpha", dict(image="x.sif", ntasks_per_node=3)).layout.nodes == 1
    # -N alone: a node's worth of ranks on each node
    assert plan("zih-alpha", dict(image="x.sif", nodes=2)).layout.ntasks == 16


def test_explicit_gpus_per_node_inside_an_allocation() -> None:
    argv = plan(
        "neuron", dict(image="x.sif", ntasks=4, gpus_per_node=4, inside_allocation=True)
    ).argv
    assert "--gres=gpu:4" in argv


# -n with --ntasks-per-node: the ranks per node asked for set the nodes and the GPUs.


@pytest.mark.parametrize(
    ("site", "fields", "expected"),
    [
        (
            "neuron",
            dict(image="x.sif", ntasks=8, ntasks_per_node=4, comment="field=ai;appl=pytorch"),
            ("-N 2 -n 8 --ntasks-per-node=4 ", "#SBATCH --gres=gpu:4\n"),
        ),
        (
            "perlmutter",
            dict(image="u/i:t", ntasks=8, ntasks_per_node=2, account="a_g"),
            ("-N 4 -n 8 --ntasks-per-node=2 ", "#SBATCH --gpus-per-node=2\n"),
        ),
        # not a multiple: the last node gets the rest (Slurm reads the per-node count as a maximum)
        (
            "zih-alpha",
            dict(image="x.sif", ntasks=10, ntasks_per_node=4),
            ("-N 3 -n 10 --ntasks-per-node=4 ", "#SBATCH --gres=gpu:4\n"),
        ),
        # all three given, fewer tasks than nodes x per node: kept as asked
        (
            "neuron",
            dict(
                image="x.sif", ntasks=6, nodes=2, ntasks_per_node=4, comment="field=ai;appl=pytorch"
            ),
            ("-N 2 -n 6 --ntasks-per-node=4 ", "#SBATCH --gres=gpu:4\n"),
        ),
        # inside an allocation the nodes are spelled out too (no GPU request on the step)
        (
            "neuron",
            dict(image="x.sif", ntasks=8, ntasks_per_node=4, inside_allocation=True),
            ("srun --kill-on-bad-exit=1 -N 2 -n 8 --ntasks-per-node=4 singularity ",),
        ),
    ],
)
def test_ntasks_with_ntasks_per_node_sets_the_nodes(
    site: str, fields: dict[str, Any], expected: tuple[str, ...]
) -> None:
    shown = plan(site, fields).shell_line()
    assert all(part in shown for part in expected), shown


def test_ntasks_with_ntasks_per_node_gives_the_same_sbatch_lines() -> None:
    req = LaunchRequest(
        script="t.py", image="x.sif", ntasks=8, ntasks_per_node=4, comment="field=ai;appl=pytorch"
    )
    text = plan_launch(load_site("neuron"), req, "batch").script
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH --n")]
    assert sbatch == [
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks=8",
        "#SBATCH --ntasks-per-node=4",
        "#SBATCH --no-requeue",
    ]
    assert "#SBATCH --gres=gpu:4" in text.splitlines()
    assert (
        text.rstrip()
        .splitlines()[-1]
        .startswith("srun --kill-on-bad-exit=1 -N 2 -n 8 --ntasks-per-node=4 ")
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"mpi": "bogus"}, "--mpi: 'bogus' is not allowed"),
        ({"controller": "horovodrun"}, "--controller: 'horovodrun' is not allowed"),
        ({"ntasks": 0}, "-n/--ntasks: must be 1 to 1000000 (got 0)"),
        ({"nodes": 10**30}, "-N/--nodes: must be 1 to 1000000"),
        ({"env": {"A B": "1"}}, "--env: 'A B' is not a variable name"),
        ({"binds": ["data:/data"]}, "--bind: 'data:/data' is not SRC"),
        ({"time": "soon"}, "--time: 'soon' is not a Slurm time"),
        # `$` in a match also matches before a trailing newline; \d takes other scripts' digits
        ({"env": {"A\n": "1"}}, "--env: 'A\\n' is not a variable name"),
        ({"time": "10\n"}, "--time: '10\\n' is not a Slurm time"),
        ({"time": "١٠"}, "--time: '١٠' is not a Slurm time"),
        ({"image": "-x.sif"}, "--image: '-x.sif' starts with '-'"),
        ({"binds": ["/a:/a,data:/d"]}, "--bind: 'data:/d' is not SRC"),
    ],
)
def test_library_callers_go_through_the_same_check(fields: dict, message: str) -> None:  # type: ignore[type-arg]
    """The plan checks the request itself, not only the CLI."""
    request = LaunchRequest(**{"script": "t.py", "image": "u/i:t", **fields})
    for mode in ("run", "batch", "jupyter", "smoke"):
        with pytest.raises(UserError) as info:
            plan_launch(load_site("perlmutter"), request, mode)
        assert str(info.value).startswith(message)


def test_a_comma_list_of_binds_is_each_bind_on_its_own() -> None:
    request = LaunchRequest(script="t.py", image="x.sif", ntasks=8, comment="field=ai;appl=pytorch",
                            binds=["/a:/a:ro,/b"])  # fmt: skip
    argv = plan_launch(load_site("neuron"), request).step
    assert argv[argv.index("singularity") :][:7] == [
        "singularity", "exec", "--nv", "-B", "/a:/a:ro", "-B", "/b:/b",
    ]  # fmt: skip


@pytest.mark.parametrize("runtime", ["singularity", "apptainer"])
def test_a_registry_image_under_apptainer_on_many_ranks_is_converted_first(runtime: str) -> None:
    with pytest.raises(UserError) as info:
        plan(
            "neuron",
            dict(image="docker:user/img:tag", ntasks=4, runtime=runtime, inside_allocation=True),
        )
    assert str(info.value) == (
        f"{runtime} would convert docker://user/img:tag into a SIF in each of the 4 tasks at "
        f"once: convert it once first (`{runtime} pull image.sif docker://user/img:tag` on the "
        "login node, or `hvd-container convert IMAGE --to sif -o image.sif`) and pass --image "
        "image.sif"
    )
    # a SIF, or one rank, is fine
    assert plan("neuron", dict(image="x.sif", ntasks=4, inside_allocation=True)).step[0] == "srun"


def test_a_recipe_on_a_registry_site_without_its_registry_is_refused() -> None:
    facts = ImageFacts(source="recipe cpu-bookworm", name="cpu-bookworm", version="1")
    with pytest.raises(UserError) as info:
        plan(
            "perlmutter", dict(recipe="cpu-bookworm", facts=facts, ntasks=4, inside_allocation=True)
        )
    assert str(info.value).startswith(
        "--recipe: site perlmutter has no images.registry, so the image would be "
        "docker.io/library/cpu-bookworm:1, where `hvd-container push` never puts it"
    )
    # with the site's registry the recipe names a reachable image
    site = load_site("perlmutter")
    site = site.model_copy(
        update={"images": site.images.model_copy(update={"registry": "registry.nersc.gov/m1234"})}
    )
    line = plan_launch(
        site,
        LaunchRequest(
            script="t.py", recipe="cpu-bookworm", facts=facts, ntasks=4, inside_allocation=True
        ),
    )
    assert "--image=docker:registry.nersc.gov/m1234/cpu-bookworm:1" in words(line)


@pytest.mark.parametrize(("nodes", "forced"), [(1, False), (2, True), (None, True)])
def test_nccl_net_is_forced_only_when_the_launch_spans_nodes(
    job_dir: str,  # noqa: F811
    nodes: int | None,
    forced: bool,
) -> None:
    """A profile's multi_node_env (a forced NCCL_NET, say) goes only into launches that span
    nodes: one node needs no network transport (and a forced one fails where the plugin is
    absent); nodes left to Slurm may be several."""
    site = load_site("cscs-clariden")
    site = site.model_copy(update={"multi_node_env": {"NCCL_NET": "AWS Libfabric"}})
    fields: dict = {"script": "t.py", "image": "u/i:t", "controller": "torch",
                    "ntasks": 4 if nodes == 1 else 8, "nodes": nodes}  # fmt: skip
    launch = plan_launch(site, LaunchRequest(**fields))
    assert ("NCCL_NET" in launch.env) is forced
    assert launch.env["PMIX_MCA_psec"] == "^munge"  # the rest of the site's env, always
    assert (launch.env.get("NCCL_NET") == "AWS Libfabric") is forced


@pytest.mark.parametrize("runtime", ["shifter", "podman-hpc"])
def test_perlmutter_forces_no_nccl_net_as_nersc_stopped_doing(
    job_dir: str,  # noqa: F811
    runtime: str,
) -> None:
    """NERSC's NCCL module stopped setting NCCL_NET="AWS Libfabric" on 2025-05-16: the
    profile forced it on every multi-node launch. The runtime's NCCL module (shifter's
    nccl-plugin, podman-hpc's --nccl) brings the plugin NCCL loads by itself, which the
    nccl-network check says instead of a warning."""
    fields: dict = {"script": "t.py", "image": "u/i:t", "account": "m1_g", "controller": "torch",
                    "nodes": 2, "runtime": runtime}  # fmt: skip
    launch = plan_launch(load_site("perlmutter"), LaunchRequest(**fields))
    assert "NCCL_NET" not in launch.env and launch.env["NCCL_SOCKET_IFNAME"] == "hsn"
    (net,) = [r for r in launch.results if r.check == "nccl-network"]
    module = "shifter's nccl-plugin module" if runtime == "shifter" else "podman-hpc's nccl module"
    assert net.status == "n/a" and net.message.startswith(module), net
    assert "--nccl" in launch.step or "--module=gpu,nccl-plugin" in launch.step
