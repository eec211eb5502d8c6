"""The converted-image cache under eight nodes at once: each node's first launch step unpacks
the same SIF into the same (empty) cache at the same moment. Every node must get the whole
image (never a half-unpacked one), all of them the same directory, and no unfinished unpack may
be left. The local cluster is started with 8 nodes for this (testbed/slurm.sh up --nodes 8)
and goes back to 2 afterwards."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.sif_fixtures import ROOT, import_image, run_testbed, shell_rootfs
from tests.e2e.slurm_fixtures import cli

pytestmark = pytest.mark.e2e

NODES = 8
FILLER = 48 * 1024 * 1024  # incompressible: unpacking takes long enough for the runs to overlap

# each node: prepare the image (unpack or reuse), then read it back whole
NODE_SCRIPT = """\
import hashlib, os, sys
from hvd_container.launcher.runtimes.charliecloud import prepare_image as prepare
image = prepare(sys.argv[1])
data = (image.root / "opt" / "filler.bin").read_bytes()
print("NODE", os.uname().nodename, image.root, len(data), hashlib.sha256(data).hexdigest(), flush=True)
"""


@pytest.fixture(scope="module")
def eight_nodes() -> Iterator[None]:
    run_testbed("slurm.sh", "up", "--nodes", str(NODES))
    try:
        yield
    finally:
        run_testbed("slurm.sh", "up")  # the 2-node cluster the other tests expect


@pytest.fixture(scope="module")
def filler_sif(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    import docker

    run_testbed("docker.sh", "up")
    run_testbed("sif-tools.sh", "up")
    client: Any = docker.from_env()
    rootfs = shell_rootfs(extra_bytes=FILLER)
    tag = import_image(client, "hvd-test/cache-filler:1", rootfs)
    target = tmp_path_factory.mktemp("sif") / "filler.sif"
    result = cli("convert", tag, "--to", "sif", "-o", str(target))
    assert result.returncode == 0, result.stderr
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(rootfs)) as tar:
        member = tar.extractfile("opt/filler.bin")
        assert member is not None
        digest = hashlib.sha256(member.read()).hexdigest()
    return target, digest


def test_eight_nodes_unpacking_at_once_all_see_the_whole_image(
    eight_nodes: None, filler_sif: tuple[Path, str], tmp_path: Path
) -> None:
    sif, digest = filler_sif
    cache = tmp_path / "cache"  # empty: every node races to unpack
    script = tmp_path / "node.py"
    script.write_text(NODE_SCRIPT)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
        "HVD_CONTAINER_CACHE": str(cache),
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        ["srun", "-N", str(NODES), "--ntasks-per-node", "1", sys.executable, str(script), str(sif)],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("NODE ")]
    assert sorted(r[1] for r in rows) == [f"node{i}" for i in range(1, NODES + 1)], proc.stdout
    assert len({r[2] for r in rows}) == 1  # one published directory for all
    assert {(r[3], r[4]) for r in rows} == {(str(FILLER), digest)}  # whole, on every node
    left = sorted(p.name for p in (cache / "images").iterdir())
    assert not [name for name in left if ".part-" in name], left
