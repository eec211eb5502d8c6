"""PyTorch's own distributed training (DDP, FSDP) across the local cluster's two nodes:
`--controller torch` (one srun task per rank) and `--controller torchrun` (torchrun on each
node, c10d rendezvous on the first), under Charliecloud from the SIF of the image without
Horovod (recipe cpu-bookworm-torch) and under podman-hpc from the CPU image the podman-hpc
tests migrated into its store (torch is in it too: one migration for the session). Each trains
over gloo; the losses fall and rank 0 alone writes the checkpoint."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.podman_hpc_fixtures import cpu_migrated  # noqa: F401
from tests.e2e.sif_fixtures import ROOT
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    cpu_sif,
    job_dir,
    slurm_cluster,
    torch_sif,
)

pytestmark = pytest.mark.e2e

EXAMPLES = {"ddp": "ddp_synthetic.py", "fsdp": "fsdp_synthetic.py"}


def check_torch_training(stdout: str, kind: str, checkpoint: Path, epochs: int) -> None:
    """Size 2 over gloo, one rank on each node, the loss falling on both ranks, the
    checkpoint written by rank 0 alone."""
    hosts = set()
    for rank in (0, 1):
        found = re.search(
            rf"^\[rank {rank}\] torch.distributed {kind} initialised: rank {rank} of size 2, "
            rf"local rank 0 of 1, backend gloo, host (\S+), rendezvous node1:(\d+)",
            stdout, re.M,
        )  # fmt: skip
        assert found, stdout
        hosts.add(found[1])
        losses = [
            float(x)
            for x in re.findall(rf"^\[rank {rank}\] epoch \d+ loss ([0-9.]+)", stdout, re.M)
        ]
        assert len(losses) == epochs and losses[-1] < losses[0] * 0.8, (rank, losses, stdout)
    assert hosts == {"node1", "node2"}, hosts
    assert f"[rank 0] checkpoint written to {checkpoint}" in stdout
    assert "[rank 1] checkpoint written" not in stdout
    assert checkpoint.is_file() and checkpoint.stat().st_size > 1000
    assert re.search(
        r"^\[rank 0\] done: \d+ steps, median step time [0-9.]+ ms, CPU time per step [0-9.]+ ms$",
        stdout,
        re.M,
    )


# Each pair of values of two of runtime, kind and controller, once (all eight combinations
# took 90 s of a CI run for what four of them show: neither runtime touches the script, and
# DDP and FSDP start the same way under each controller).
PAIRWISE = [
    ("charliecloud", "ddp", "torch"),
    ("charliecloud", "fsdp", "torchrun"),
    ("podman-hpc", "ddp", "torchrun"),
    ("podman-hpc", "fsdp", "torch"),
]


@pytest.mark.parametrize(("runtime", "kind", "controller"), PAIRWISE)
def test_two_node_torch_distributed_training(
    runtime: str,
    kind: str,
    controller: str,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    job_dir: Path,  # noqa: F811
    request: pytest.FixtureRequest,
) -> None:
    if runtime == "charliecloud":
        image = ["--image", str(request.getfixturevalue("torch_sif"))]
    else:
        image = ["--runtime", "podman-hpc", "--image", request.getfixturevalue("cpu_migrated")]
    checkpoint = job_dir / kind / "model.pt"
    result = cli(
        "run", "--site", "local", *image, "--controller", controller, "-N", "2",
        "--ntasks-per-node", "1", str(ROOT / "examples" / EXAMPLES[kind]), "--epochs", "3",
        "--checkpoint", str(checkpoint), cwd=job_dir, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    check_torch_training(result.stdout, kind.upper(), checkpoint, epochs=3)


def test_the_recipe_declares_its_controller_and_the_sif_has_no_horovod(
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    torch_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """No --controller: `--recipe cpu-bookworm-torch` declares torch; the image has no Horovod."""
    (job_dir / "cpu-bookworm-torch_1.sif").symlink_to(torch_sif)
    probe = "import importlib.util as u, os; print('horovod', u.find_spec('horovod') is not None, 'rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], 'local', os.environ['LOCAL_RANK'], os.environ['LOCAL_WORLD_SIZE'])"
    result = cli(
        "run", "--site", "local", "--recipe", "cpu-bookworm-torch", "-N", "2",
        "--ntasks-per-node", "2", "-c", "1", "/opt/venv/bin/python", "-c", probe, cwd=job_dir,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(line for line in result.stdout.splitlines() if line.startswith("horovod"))
    assert lines == [f"horovod False rank {r} of 4 local {r % 2} 2" for r in range(4)], (
        result.stdout
    )


def test_a_ddp_script_runs_with_no_controller_named(
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    cpu_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """The Horovod image (cpu-bookworm, which declares no controller) and the DDP example with
    no --controller: the script's init_process_group chooses torch (it got Horovod's MPI
    launch before: no RANK, WORLD_SIZE or MASTER_ADDR, and init_process_group failed)."""
    checkpoint = job_dir / "ddp" / "model.pt"
    result = cli(
        "run", "--site", "local", "--image", str(cpu_sif), "-N", "2", "--ntasks-per-node", "1",
        str(ROOT / "examples" / "ddp_synthetic.py"), "--epochs", "3", "--checkpoint",
        str(checkpoint), cwd=job_dir, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    check_torch_training(result.stdout, "DDP", checkpoint, epochs=3)


def test_torchruns_task_holds_the_cpus_of_all_its_ranks(
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    torch_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """-c is a rank's CPUs: torchrun's one task on a node starts 2 ranks, so it gets 2 x 1
    CPUs (it got 1, which the 2 ranks shared). Each rank prints the CPUs it may run on."""
    probe = job_dir / "cpus.py"
    probe.write_text(  # one write(2) a line: the two ranks share the step's output pipe
        "import os\nn = len(os.sched_getaffinity(0))\n"
        "os.write(1, f\"ranks {os.environ['RANK']} {n}\\n\".encode())\n"
    )
    result = cli(
        "run", "--site", "local", "--image", str(torch_sif), "--controller", "torchrun",
        "-N", "1", "--ntasks-per-node", "2", "-c", "1", str(probe), cwd=job_dir, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    seen = sorted(line for line in result.stdout.splitlines() if line.startswith("ranks"))
    assert seen == ["ranks 0 2", "ranks 1 2"], result.stdout


# Accelerate and what it needs beyond the image (which has torch, numpy, filelock, fsspec and
# typing-extensions), as pip resolved them for Python 3.11 on 2026-11-26.
ACCELERATE = [
    "accelerate==1.15.0", "huggingface_hub==2.4.0", "packaging==26.4", "PyYAML==6.0.4",
    "safetensors==0.8.0", "psutil==7.2.2", "click==8.5.1", "hf-xet==1.8.0", "httpx2==2.16.2",
    "httpcore2==2.16.2", "tqdm==4.70.1", "anyio==4.16.0", "idna==3.20", "truststore==0.10.5",
    "h11==0.16.0",
]  # fmt: skip


@pytest.fixture(scope="module")
def accelerate_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Accelerate's wheels for the image's Python, in a folder on the shared filesystem that
    the ranks put on PYTHONPATH (the image stays as built)."""
    target = tmp_path_factory.mktemp("accelerate") / "site"
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.11", "--implementation", "cp",
         *(f"--platform={p}" for p in platforms), "--target", str(target), *ACCELERATE],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    # Accelerate's test script ends without destroy_process_group(): at interpreter exit Gloo's
    # worker threads are torn down with the process group and now and then abort both ranks
    # ("terminate called without an active exception", exit 134) after every check passed
    # (pytorch/pytorch#190489; the atexit handler of pytorch/pytorch#179291, not merged). The
    # script stays unchanged; this folder's sitecustomize destroys the group at exit instead,
    # then collects: the prepared DDP model holds the group in reference cycles, which the
    # interpreter's finalization would otherwise free, gloo's threads with them (the abort
    # came back once in a cold CI run with the destroy alone).
    (target / "sitecustomize.py").write_text(EXIT_CLEANUP)
    return target


EXIT_CLEANUP = """\
import atexit


@atexit.register
def _destroy_process_group():
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    import gc

    gc.collect()
"""


@pytest.mark.parametrize("controller", ["torch", "torchrun"])
def test_accelerates_own_test_script_on_two_nodes(
    controller: str,
    accelerate_site: Path,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    torch_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """The script behind `accelerate test`, unchanged, one rank on each node. On CPU nodes
    Accelerate takes a multi-process launch only with ACCELERATE_USE_CPU=1 (what `accelerate
    launch --cpu` sets); without it each rank runs alone and they race on shared files. The
    launch sets it because the script imports accelerate and the nodes have no GPUs."""
    script = accelerate_site / "accelerate" / "test_utils" / "scripts" / "test_script.py"
    args = [
        "run", "--site", "local", "--image", str(torch_sif), "--controller", controller,
        "-N", "2", "--ntasks-per-node", "1", "-e", f"PYTHONPATH={accelerate_site}", str(script),
    ]  # fmt: skip
    shown = cli(*args[:1], "--dry-run", *args[1:], cwd=job_dir)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "ACCELERATE_USE_CPU=1" in shown.stdout, shown.stdout
    result = cli(*args, cwd=job_dir, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    # Per node (local process 0 prints): both nodes ran every part to the end
    for part in ("Initialization", "Test random number generator synchronization",
                 "DataLoader integration test", "Training integration test",
                 "Breakpoint trigger test"):  # fmt: skip
        assert result.stdout.count(f"**{part}**") == 2, (part, result.stdout)
