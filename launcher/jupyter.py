"""JupyterLab inside the image on a compute node, reached through an ssh tunnel.

The site guides start Jupyter with `--NotebookApp.token=$USER`, which lets anyone on the cluster
who knows the user name in. Here the port and the token are random; the token travels in the
batch script's environment (JUPYTER_TOKEN, which Jupyter Server reads), not on a command line
that `ps` shows on the node.
"""

from __future__ import annotations

import re
import secrets
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from hvd_container.errors import StepFailed, UserError

PORT_RANGE = (20000, 60000)
READY = re.compile(r"(Jupyter Server|JupyterLab).*is running at|http://\S+:(\d+)/")


@dataclass(frozen=True)
class JupyterSession:
    job_id: str
    node: str
    node_addr: str
    port: int
    token: str
    login_host: str
    user: str

    @property
    def ssh_line(self) -> str:
        return f"ssh -L localhost:{self.port}:{self.node}:{self.port} {self.user}@{self.login_host}"

    @property
    def local_url(self) -> str:
        return f"http://localhost:{self.port}/lab?token={self.token}"

    @property
    def cluster_url(self) -> str:
        return f"http://{self.node_addr}:{self.port}/lab?token={self.token}"


def random_port() -> int:
    return PORT_RANGE[0] + secrets.randbelow(PORT_RANGE[1] - PORT_RANGE[0])


def jupyter_request(request, port: int, token: str, root_dir: str):  # type: ignore[no-untyped-def]
    """The launch request for one JupyterLab process on one node."""
    args = [
        "-m", "jupyterlab", "--no-browser", "--ip=0.0.0.0", f"--port={port}",
        "--ServerApp.port_retries=0", f"--ServerApp.root_dir={root_dir}", "--allow-root",
    ]  # fmt: skip
    # Images are read-only (ch-run, Apptainer): Jupyter's runtime and state go to the
    # working directory, which is bound in.
    state = f"{root_dir}/.hvd-container/jupyter"
    env = {
        "JUPYTER_RUNTIME_DIR": f"{state}/runtime",
        "JUPYTERLAB_WORKSPACES_DIR": f"{state}/workspaces",
        "IPYTHONDIR": f"{state}/ipython",
        **request.env,
        "JUPYTER_TOKEN": token,
    }
    return replace(
        request,
        script="python",
        args=args,
        nodes=1,
        ntasks=None,
        ntasks_per_node=1,
        job_name=request.job_name or "jupyter",
        env=env,
        mpi=request.mpi or "none",
        lightning=False,
    )


def _node_addr(node: str) -> str:
    import subprocess

    out = subprocess.run(
        ["scontrol", "show", "node", "-o", node], capture_output=True, text=True
    ).stdout
    match = re.search(r"NodeAddr=(\S+)", out)
    return match.group(1) if match else node


def start(site, request, *, timeout: float = 300, poll: float = 0.5) -> JupyterSession:  # type: ignore[no-untyped-def]
    """Submit the Jupyter job, wait until the server answers in its log, return how to reach it."""
    import os

    from launcher import slurm

    port = random_port()
    token = secrets.token_urlsafe(32)
    req = jupyter_request(request, port, token, request.workdir or os.getcwd())
    python = site.runtime_for(req.runtime).python
    req = replace(req, script=python if python.startswith("/") else req.script)
    job_id = slurm.submit_launch(site, req, private=True)  # the log shows the token
    deadline = time.monotonic() + timeout
    last_state = None
    while True:
        job = slurm.job_info(str(job_id))
        if job is None:
            raise StepFailed(f"job {job_id}: Slurm lost the Jupyter job")
        if job.state != last_state:
            print(f"job {job_id} {job.state}", file=sys.stderr, flush=True)
            last_state = job.state
        if job.finished:
            raise StepFailed(
                f"job {job_id} ended ({job.state}) before Jupyter started: see {slurm.output_path(job)}"
            )
        if job.state == "RUNNING" and _server_ready(job):
            node = job.nodes
            return JupyterSession(
                job_id=str(job_id),
                node=node,
                node_addr=_node_addr(node),
                port=port,
                token=token,
                login_host=site.login_host or _this_host(),
                user=slurm.current_user(),
            )
        if time.monotonic() > deadline:
            slurm.cancel(str(job_id))
            raise StepFailed(
                f"job {job_id}: Jupyter did not start within {timeout:.0f} s; cancelled"
            )
        time.sleep(poll)


def _server_ready(job) -> bool:  # type: ignore[no-untyped-def]
    from launcher import slurm

    for name in {job.stdout, job.stderr}:
        if not name:
            continue
        path = slurm.output_path(replace(job, stdout=name))
        try:
            text = Path(path).read_text(errors="replace") if path else ""
        except FileNotFoundError:
            continue
        if READY.search(text):
            return True
    return False


def _this_host() -> str:
    import socket

    return socket.getfqdn()


def stop(job_id: str) -> None:
    from launcher import slurm

    if not job_id.isdigit():
        raise UserError(f"--stop: {job_id!r} is not a job id (allowed: digits)")
    slurm.cancel(job_id)
