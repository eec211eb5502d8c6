"""The controller a launch takes when none is named: the script's own (a text scan), else the
default, and the dry run, the batch script and --json say which and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _launch_helpers import plan_launch, write
from hvd_container.launcher import controllers
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import load_site

from hvd_container.cli.app import main

ROOT = Path(__file__).resolve().parents[4]

SCRIPTS = {
    "ddp.py": ("import torch.distributed as dist\ndist.init_process_group('nccl')\n", "torch"),
    "env.py": ("import os\nrank = int(os.environ['LOCAL_RANK'])\n", "torch"),
    "getenv.py": ("import os\nn = os.environ.get('WORLD_SIZE', '1')\n", "torch"),
    "acc.py": ("from accelerate import Accelerator\nacc = Accelerator()\n", "torch"),
    "hf.py": ("from transformers import Trainer, TrainingArguments\n", "torch"),
    "hvd.py": ("import horovod.torch as hvd\nhvd.init()\n", "mpi"),
    # Horovod's script that also reads LOCAL_RANK stays Horovod's
    "hvd_env.py": ("import os, horovod.torch as hvd\nos.environ['LOCAL_RANK']\n", "mpi"),
    "pl.py": ("import lightning as L\nimport torch.distributed as dist\n", "lightning"),
    "fsdp.py": ("from torch.distributed.fsdp import fully_shard\n", "torch"),
    # a comment or a string naming it is not a call
    "plain.py": ("# we do not call init_process_group here\nprint('init_process_group')\n", "mpi"),
}


def chosen(script: Path) -> controllers.Controller:
    return controllers.choose(LaunchRequest(script=str(script)), None)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_script_chooses_its_controller(tmp_path: Path, name: str) -> None:
    text, expected = SCRIPTS[name]
    controller = chosen(write(tmp_path / name, text))
    assert controller.name == expected
    if name != "plain.py":
        assert not controller.guessed and controller.why.startswith(str(tmp_path / name))


def test_the_projects_own_examples_choose_theirs() -> None:
    examples = ROOT / "examples"
    assert chosen(examples / "ddp_synthetic.py").name == "torch"
    assert chosen(examples / "fsdp_synthetic.py").name == "torch"
    assert chosen(examples / "pytorch_synthetic.py").name == "mpi"
    assert chosen(examples / "lightning_synthetic.py").name == "lightning"
    assert "calls init_process_group" in chosen(examples / "ddp_synthetic.py").why


@pytest.mark.parametrize(
    ("script", "why"),
    [("run.sh", "is not a Python script"), ("/on/the/cluster/train.py", "is not readable here")],
)
def test_nothing_to_tell_takes_the_default_and_says_so(
    tmp_path: Path, script: str, why: str
) -> None:
    if script.endswith(".sh"):
        script = str(write(tmp_path / script, "python -m pkg\n"))
    controller = chosen(Path(script))
    assert controller.name == "mpi" and controller.guessed
    assert why in controller.why and "--controller" in controller.why


def test_the_dry_run_json_and_batch_script_name_the_controller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shell = write(tmp_path / "run.sh", "exec python -m pkg\n")
    args = ["--site", "neuron", "--image", "x.sif", "--comment", "field=ai;appl=pytorch", "-n", "8"]
    assert main(["run", *args, "--dry-run", "--json", str(shell)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["controller"]["name"] == "mpi"
    assert "is not a Python script" in record["controller"]["why"]
    assert any(w.startswith("controller mpi: the default") for w in record["warnings"])
    assert main(["run", *args, "--dry-run", str(shell)]) == 0
    assert "warning: controller mpi: the default" in capsys.readouterr().err
    ddp = str(ROOT / "examples" / "ddp_synthetic.py")
    assert main(["batch", *args, "--json", ddp]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["controller"]["name"] == "torch"
    assert (
        "# controller torch (" in record["script"]
        and "calls init_process_group" in record["script"]
    )
    assert "RANK=" in record["script"]  # torch's own rendezvous, not an MPI launch


@pytest.mark.parametrize(("gpus", "expected"), [(0, "1"), (4, None)])
def test_accelerate_on_cpu_nodes_gets_accelerate_use_cpu(
    tmp_path: Path, gpus: int, expected: str | None
) -> None:
    script = write(tmp_path / "acc.py", "from accelerate import Accelerator\n")
    controller = controllers.get("torchrun")
    assert controller.environment(str(script), gpus).get("ACCELERATE_USE_CPU") == expected
    other = write(
        tmp_path / "plain_ddp.py", "import torch.distributed as d\nd.init_process_group()\n"
    )
    assert controller.environment(str(other), 0) == {}


def test_accelerate_use_cpu_reaches_the_launch_and_a_users_value_wins(tmp_path: Path) -> None:
    script = str(write(tmp_path / "acc.py", "from accelerate import Accelerator\n"))
    site = load_site("local")  # CPU nodes
    plan = plan_launch(site, LaunchRequest(script=script, image="x.sif", ntasks=2))
    assert plan.launch.controller.name == "torch" and plan.env["ACCELERATE_USE_CPU"] == "1"
    own = LaunchRequest(script=script, image="x.sif", ntasks=2, env={"ACCELERATE_USE_CPU": "0"})
    assert plan_launch(site, own).env["ACCELERATE_USE_CPU"] == "0"


def test_a_mistyped_script_says_the_file_it_is_close_to_and_its_controller(
    tmp_path: Path,
) -> None:
    """The launch of a script that is not here keeps the default (it runs what was typed), and
    says which file was likely meant and what that one would launch with."""
    write(tmp_path / "multinode.py", SCRIPTS["ddp.py"][0])
    guess = chosen(tmp_path / "mulitnode.py")
    assert guess.name == "mpi" and guess.guessed
    assert (
        f"did you mean {tmp_path / 'multinode.py'}? (calls init_process_group: --controller torch)"
        in guess.why
    )
    assert "did you mean" not in chosen(tmp_path / "unrelated.py").why
