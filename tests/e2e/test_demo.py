"""The README's main command, end to end: testbed/demo.sh (what `make demo` runs after install).

It starts the engines itself, builds the CPU recipe (a cache hit once the build tests ran),
converts it to a SIF under the name `convert` gives, trains on the two Slurm nodes and prints
where the image, the checkpoint and the job logs are. The test checks each printed path.
Where an earlier test converted the same image, its SIF is linked there first and the demo's
`convert` keeps it (what a user's second `make demo` does): the conversion itself is the one
test_convert_cpu checks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.sif_fixtures import ROOT
from tests.e2e.slurm_fixtures import converted_sif

pytestmark = pytest.mark.e2e


def test_demo_runs_the_whole_path_and_says_where_things_are(tmp_path: Path) -> None:
    out = tmp_path / "out"
    converted = converted_sif("cpu-bookworm:1")
    if converted is not None:
        (out / "demo").mkdir(parents=True)
        try:
            os.link(converted, out / "demo" / "cpu-bookworm_1.sif")
        except OSError:  # another file system
            shutil.copyfile(converted, out / "demo" / "cpu-bookworm_1.sif")
    env = {
        **os.environ,
        "OUT": str(out),
        "EPOCHS": "3",
        # the checkout's code, whichever hvd-container is on PATH
        "HVD": f"{sys.executable} -m hvd_container",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        ["sh", str(ROOT / "testbed" / "demo.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = "kept" if converted is not None else "wrote"  # the path as convert names it
    assert re.search(rf"^{said} cpu-bookworm_1\.sif", proc.stdout, re.M), proc.stdout

    # both ranks trained, on both nodes, and the loss fell
    for rank, node in ((0, "node1"), (1, "node2")):
        assert re.search(rf"^\[rank {rank}\] horovod initialised: rank {rank} of size 2, .*host {node}", proc.stdout, re.M), proc.stdout  # fmt: skip
        losses = [float(x) for x in re.findall(rf"^\[rank {rank}\] epoch \d+ loss ([0-9.]+)", proc.stdout, re.M)]  # fmt: skip
        assert len(losses) == 3 and losses[-1] < losses[0], proc.stdout

    said = dict(re.findall(r"^(image|checkpoint|job logs):\s+(\S+)", proc.stdout, re.M))
    demo_dir = out / "demo"
    image = Path(said["image"])
    assert image == demo_dir / "cpu-bookworm_1.sif" and image.stat().st_size > 100_000_000
    checkpoint = Path(said["checkpoint"])
    assert checkpoint == demo_dir / "checkpoints" / "model.pt"
    assert checkpoint.is_file() and checkpoint.stat().st_size > 1000
    log = Path(said["job logs"])
    assert log.parent == demo_dir and re.fullmatch(r"pytorch_synthetic_\d+\.out", log.name)
    assert "[rank 0] checkpoint written to" in log.read_text()
    assert log.with_suffix(".err").is_file()
