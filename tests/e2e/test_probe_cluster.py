"""`hvd-container sites probe` against the real local cluster (two partitions, GRES gpu by
count) and Debian's Lmod with the testbed's modulefiles: the profile it writes validates and
trains on two nodes, and `--diff` reports exactly what changed on the site."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.sif_fixtures import ROOT
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    cpu_sif,
    job_dir,
    run_testbed,
    slurm_cluster,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def lmod_env() -> dict[str, str]:
    """Lmod and the testbed's modulefiles, as a login shell would have them."""
    run_testbed("lmod.sh", "up")
    out = subprocess.run(
        ["sh", str(ROOT / "testbed" / "lmod.sh"), "env"], capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


@pytest.fixture(scope="session")
def podman_hpc_runtime() -> None:
    """podman-hpc, the local profile's other runtime: `--diff` looks for every runtime the
    profile names (run alone on a fresh machine, nothing else had installed it)."""
    run_testbed("podman-hpc.sh", "up")


def test_a_probed_profile_validates_and_trains_on_two_nodes(
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    lmod_env: dict[str, str],
    cpu_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    profile = job_dir / "mysite.yaml"
    probed = cli("sites", "probe", "-o", str(profile), env=lmod_env, timeout=120)
    assert probed.returncode == 0, probed.stderr
    assert probed.stdout.startswith(
        f"wrote {profile}: site mysite, 2 partitions, runtime charliecloud"
    )
    text = profile.read_text()
    assert "# TODO: shared_paths" in text  # what it could not read, it says
    valid = cli("sites", "validate", str(profile))
    assert valid.returncode == 0, valid.stderr
    shown = cli("sites", "show", str(profile), "--json")
    record = json.loads(shown.stdout)["profile"]
    assert record["scheduler"]["partitions"]["gpu"]["gpus_per_node"] == 2
    assert record["scheduler"]["partitions"]["gpu"]["max_time"] == "01:00:00"
    assert record["scheduler"]["partition"] == "debug"
    assert record["site_modules"] == ["cuda/13.0", "nccl-plugin", "singularity/4.3.4"]
    assert all(s["probed"] and not s["url"] for s in record["sources"])

    checkpoint = job_dir / "probed.pt"
    trained = cli(
        "run", "--site", str(profile), "--image", str(cpu_sif), "-N", "2", "--ntasks-per-node",
        "1", str(ROOT / "examples" / "pytorch_synthetic.py"), "--epochs", "3",
        "--checkpoint", str(checkpoint), cwd=job_dir, timeout=900,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    for rank, node in ((0, "node1"), (1, "node2")):
        assert re.search(rf"^\[rank {rank}\] horovod initialised: rank {rank} of size 2, .* {node}", trained.stdout, re.M), trained.stdout  # fmt: skip
    assert checkpoint.is_file()


def test_diff_reports_exactly_what_changed_on_the_site(
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    podman_hpc_runtime: None,
    lmod_env: dict[str, str],
    tmp_path: Path,
) -> None:
    same = cli("sites", "probe", "--diff", "local", env=lmod_env, timeout=120)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("site local: no drift")
    # the site changes: a partition is added, a module renamed
    tree = tmp_path / "modulefiles"
    shutil.copytree(lmod_env["MODULEPATH"], tree)
    (tree / "nccl-plugin.lua").rename(tree / "nccl-ofi-plugin.lua")
    subprocess.run(
        ["scontrol", "create", "PartitionName=extra", "Nodes=node[1-2]", "MaxTime=30"], check=True
    )
    try:
        changed = cli(
            "sites", "probe", "--diff", "local", env={**lmod_env, "MODULEPATH": str(tree)},
            timeout=120,
        )  # fmt: skip
    finally:
        subprocess.run(["scontrol", "delete", "PartitionName=extra"], check=False)
    assert changed.returncode == 1, changed.stderr
    assert changed.stdout.splitlines() == [
        "scheduler.partitions.extra: (absent) → {gpus_per_node: 2, arch: amd64, cpus_per_node: 4, max_time: 00:30:00}",
        "site_modules: nccl-plugin → (absent)",
        "site_modules: (absent) → nccl-ofi-plugin",
    ]


def test_a_probe_with_nodes_reads_a_nodes_glibc(
    slurm_cluster: str,  # noqa: F811
    lmod_env: dict[str, str],
    job_dir: Path,  # noqa: F811
) -> None:
    """--nodes runs one short job: its uname -m and ldd --version reach the profile (the way
    to confirm a profile's injects_glibc); the nodes here are this machine's namespaces."""
    here = subprocess.run(["ldd", "--version"], capture_output=True, text=True).stdout
    glibc = re.search(r"(\d+\.\d+)\s*$", here.splitlines()[0])
    assert glibc is not None, here
    profile = job_dir / "nodes.yaml"
    probed = cli("sites", "probe", "--nodes", "-o", str(profile), env=lmod_env, timeout=300)
    assert probed.returncode == 0, probed.stdout + probed.stderr
    text = profile.read_text()
    assert f"# TODO: runtime.injects_glibc: the nodes' glibc is {glibc[1]} (ldd --version" in text
    assert f"glibc {glibc[1]} and GPU" in text  # the source of what the job read
