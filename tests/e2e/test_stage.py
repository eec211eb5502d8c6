"""`--stage` for real: sbcast copies the image to every node of the allocation before the step,
and the step runs from that copy. The local cluster's nodes share this machine's /tmp, so the
copy is one file: what shows the step ran from it is ch-run's own command line, read on each
node from inside the container (ch-run shares the host's process table).

The image is the torch image's root file system as a SquashFS file, which ch-run mounts where
it lies, read-only: a bind destination must exist in it, so the jobs run in /tmp (the working
directory ch-run binds), with their files there."""

from __future__ import annotations

import filecmp
import getpass
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hvd_container.containers.sif.reader import read_sif

from tests.e2e.sif_fixtures import ROOT
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    slurm_cluster,
    torch_sif,
)
from tests.e2e.test_run_torch import EXAMPLES, check_torch_training

pytestmark = pytest.mark.e2e

PYTHON = "/opt/venv/bin/python"  # a SquashFS file brings no environment file: PATH is the host's

# on each node: the command lines of the ch-run processes that name a staged copy
PROBE = (
    "import glob, socket\n"
    "lines = set()\n"
    "for p in glob.glob('/proc/[0-9]*/cmdline'):\n"
    "    try:\n"
    "        words = open(p, 'rb').read().decode(errors='replace').split('\\0')\n"
    "    except OSError:\n"
    "        continue\n"
    "    if words and words[0].endswith('ch-run'):\n"
    "        lines.update(w for w in words if w.endswith('.sqfs'))\n"
    "print(socket.gethostname(), *sorted(lines))\n"
)


@pytest.fixture()
def work() -> Iterator[Path]:
    """A folder of this test's own under /tmp, which the image has (see above); the staged
    copies its jobs made are removed with it, passed or failed."""
    folder = Path(tempfile.mkdtemp(prefix="hvd-stage-test-", dir="/tmp"))
    # ch-run mounts a SquashFS image under /var/tmp/$USER.ch, making that folder when it is
    # missing: the local cluster's nodes share this machine's /var/tmp (a real node has its
    # own), so two nodes' ch-run made it at once and one failed with "File exists"
    (Path("/var/tmp") / f"{os.environ.get('USER') or getpass.getuser()}.ch").mkdir(
        mode=0o700, exist_ok=True
    )
    before = set(Path("/tmp").glob("hvd-stage-*"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
    for copy in set(Path("/tmp").glob("hvd-stage-*")) - before:  # the jobs' private folders
        shutil.rmtree(copy, ignore_errors=True)


@pytest.fixture()
def torch_sqfs(torch_sif: Path, work: Path) -> Path:  # noqa: F811
    """The torch image's root file system as a SquashFS file (the SIF's partition as it is)."""
    info = read_sif(torch_sif)
    target = work / "torch.sqfs"
    with torch_sif.open("rb") as src, target.open("wb") as dst:
        src.seek(info.rootfs_offset)
        left = info.rootfs_size
        while left:
            chunk = src.read(min(left, 1 << 22))
            assert chunk, "the SIF ends inside its root file system"
            dst.write(chunk)
            left -= len(chunk)
    return target


def _staged(output: str, image: Path) -> Path:
    found = re.search(
        rf"hvd-container stage: \S*{re.escape(image.name)} copied to (/tmp/hvd-stage-[0-9]+-[0-9a-f]{{16}}/{re.escape(image.name)}) on the job's nodes",
        output,
    )
    assert found, output
    return Path(found[1])


def test_a_staged_image_runs_from_its_node_local_copy_on_both_nodes(
    torch_sqfs: Path,
    work: Path,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
) -> None:
    result = cli(
        "run", "--site", "local", "--stage", "--image", torch_sqfs.name, "-N", "2",
        "--ntasks-per-node", "1", PYTHON, "-c", PROBE, cwd=work, timeout=900,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    staged = _staged(output, torch_sqfs)
    try:
        assert filecmp.cmp(staged, torch_sqfs, shallow=False)
        seen = {
            line.split()[0]: line.split()[1:]
            for line in result.stdout.splitlines()
            if line.startswith("node")
        }
        assert sorted(seen) == ["node1", "node2"], result.stdout
        for words in seen.values():  # ch-run ran the copy, never the file the step was given
            assert str(staged) in words and torch_sqfs.name not in words, result.stdout
        assert staged.parent.stat().st_mode & 0o777 == 0o700  # the job's own folder
    finally:
        shutil.rmtree(staged.parent, ignore_errors=True)


def test_ddp_trains_from_a_staged_image(
    torch_sqfs: Path,
    work: Path,
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
) -> None:
    for name in (EXAMPLES["ddp"], "_synthetic.py"):  # the example and its helper beside it
        shutil.copy(ROOT / "examples" / name, work / name)
    script = work / EXAMPLES["ddp"]
    checkpoint = work / "model.pt"
    result = cli(
        "run", "--site", "local", "--stage", "--image", str(torch_sqfs), "--controller", "torch",
        "-N", "2", "--ntasks-per-node", "1", str(script), "--epochs", "3",
        "--checkpoint", str(checkpoint), cwd=work, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    shutil.rmtree(_staged(result.stdout + result.stderr, torch_sqfs).parent, ignore_errors=True)
    check_torch_training(result.stdout, "DDP", checkpoint, epochs=3)
