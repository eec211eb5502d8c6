"""`hvd-container jupyter` on the local cluster: JupyterLab in the CPU image on a compute node.

The CPU image has no JupyterLab; the test installs it once with pip into a directory that the
job binds into the container and puts on PYTHONPATH (a recipe would list it under `pip:`).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    cpu_sif,
    job_dir,
    slurm_cluster,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def jupyter_packages() -> Path:
    target = Path(os.environ.get("HVD_E2E_CACHE", "/var/tmp/hvd-e2e")) / "jupyter-site-4.6.4"
    if not target.is_dir():
        partial = target.with_name(target.name + ".part")
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--target",
                str(partial),
                "jupyterlab==4.6.4",
            ],
            check=True,
        )
        os.replace(partial, target)
    return target


def _job_state(job_id: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        out = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True
        ).stdout
        state = re.search(r"JobState=(\S+)", out).group(1)  # type: ignore[union-attr]
        if state not in ("RUNNING", "COMPLETING") or time.monotonic() > deadline:
            return state
        time.sleep(0.2)


def test_jupyter_on_a_compute_node_with_a_random_token(
    slurm_cluster: str,  # noqa: F811
    charliecloud_runtime: None,  # noqa: F811
    cpu_sif: Path,  # noqa: F811
    jupyter_packages: Path,
    job_dir: Path,  # noqa: F811
) -> None:
    # the local site with the test nodes' cluster-facing interface named (each node is a
    # network namespace whose eth0 has an address on 10.213.7.0/24)
    profile = job_dir / "local-eth0.yaml"
    local = (Path(__file__).resolve().parents[2] / "launcher" / "sites" / "local.yaml").read_text()
    profile.write_text(
        local.replace("name: local\n", "name: local-eth0\njupyter_interface: eth0\n")
    )
    result = cli(
        "jupyter", "--site", str(profile), "--image", str(cpu_sif),
        "--bind", f"{jupyter_packages}:/opt/jupyter", "--env", "PYTHONPATH=/opt/jupyter",
        "--timeout", "240", cwd=job_dir, timeout=400,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    job_id = re.search(r"Jupyter job (\d+) on (node\d+), port (\d+)", out)
    assert job_id, out
    job, node, port = job_id.group(1), job_id.group(2), int(job_id.group(3))
    try:
        url = re.search(rf"http://(10\.213\.7\.\d+):{port}/lab\?token=(\S+)\)", out)
        assert url, out
        addr, token = url.group(1), url.group(2)
        # Jupyter listens on eth0's address only, so the tunnel leads there, not to the name
        assert re.search(rf"ssh -L localhost:{port}:{re.escape(addr)}:{port} \S+@\S+", out), out
        assert node  # the node's name is still reported
        # the runtime files (they hold the token) are not in the working directory
        assert not (job_dir / ".hvd-container" / "jupyter" / "runtime").exists()
        assert len(token) >= 32 and token not in (os.environ.get("USER", ""), "root")
        assert f"http://localhost:{port}/lab?token={token}" in out
        base = f"http://{addr}:{port}"
        allowed = requests.get(f"{base}/api/status", params={"token": token}, timeout=10)
        assert allowed.status_code == 200 and "started" in allowed.json()
        refused = requests.get(f"{base}/api/status", timeout=10)
        assert refused.status_code == 403
        wrong = requests.get(f"{base}/api/status", params={"token": "root"}, timeout=10)
        assert wrong.status_code == 403
        log = job_dir / f"jupyter_{job}.out"
        assert stat.S_IMODE(log.stat().st_mode) & 0o077 == 0  # the log shows the token
    finally:
        stopped = cli("jupyter", "--stop", job, "--json")
    assert stopped.returncode == 0, stopped.stderr
    from tests._json_records import result

    assert result("jupyter", stopped.stdout) == {
        "event": "result",
        "job_id": job,
        "cancelled": True,
    }
    assert _job_state(job) == "CANCELLED"
