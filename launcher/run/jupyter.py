"""JupyterLab inside the image on a compute node, reached through an ssh tunnel.

The site guides start Jupyter with `--NotebookApp.token=$USER`, which lets anyone on the cluster
who knows the user name in. Here the port and the token are random; the token travels in the
batch script's environment (JUPYTER_TOKEN, which Jupyter Server reads), not on a command line
that `ps` shows on the node.
"""

from __future__ import annotations

import re
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

from hvd_container.launcher import runtimes, slurm
from hvd_container.launcher.plan.planner import Plan, plan
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.run.execute import submitted_job
from hvd_container.launcher.runtimes import TOOL_FOLDER
from hvd_container.launcher.script import shell
from hvd_container.launcher.sites.machine import ThisMachine
from hvd_container.launcher.sites.model import Site
from hvd_container.launcher.slurm import Job

from hvd_container.core.errors import StepFailed, UserError
from hvd_container.core.files import private_folder
from hvd_container.core.programs import program_text
from hvd_container.core.text import ascii_digits

# below Linux's ephemeral ports (32768-60999 by default), as torch's rendezvous port: there an
# outgoing connection of another program could hold it (port_retries=0 then fails the start)
PORT_RANGE = (20000, 32768)
LOOPBACK = ("127.0.0.1", "localhost", "::1")

# `python -c BOOTSTRAP INTERFACE JUPYTER-ARGS...` in the container (launcher/programs/)
BOOTSTRAP = program_text("hvd_container.launcher", "jupyter_bootstrap.py")


def ready_pattern(port: int) -> re.Pattern[str]:
    """The URL line Jupyter prints once it listens on `port` (not any other server's URL)."""
    return re.compile(rf"https?://([^\s/:]+):{port}/")


@dataclass(frozen=True)
class JupyterSession:
    """A submitted Jupyter job and how to reach it."""

    job_id: str
    node: str
    node_addr: str
    port: int
    token: str
    login_host: str
    user: str

    tunnel_host: str = ""  # where the tunnel leads from the login node (default: the node)

    @property
    def ssh_line(self) -> str:
        target = self.tunnel_host or self.node
        forward = f"localhost:{self.port}:{target}:{self.port}"
        return shell.join(["ssh", "-L", forward, f"{self.user}@{self.login_host}"])

    @property
    def local_url(self) -> str:
        return f"http://localhost:{self.port}/lab?token={self.token}"

    @property
    def cluster_url(self) -> str:
        return f"http://{self.node_addr}:{self.port}/lab?token={self.token}"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def random_port() -> int:
    return PORT_RANGE[0] + secrets.randbelow(PORT_RANGE[1] - PORT_RANGE[0])


def jupyter_request(
    request: LaunchRequest, port: int, token: str, root_dir: str, interface: str | None = None
) -> LaunchRequest:
    """The launch request for one JupyterLab process on one node (see BOOTSTRAP)."""
    args = [
        "-c", BOOTSTRAP, interface or "", "--no-browser", f"--port={port}",
        "--ServerApp.port_retries=0", f"--ServerApp.root_dir={root_dir}", "--allow-root",
    ]  # fmt: skip
    # Images are read-only (ch-run, Apptainer): Jupyter's state (not secret) goes to the
    # working directory, which is bound in; its runtime files go to BOOTSTRAP's private one.
    state = f"{root_dir}/{TOOL_FOLDER}/jupyter"
    env = {
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
    )


def _node_addr(node: str) -> str:
    out = subprocess.run(
        ["scontrol", "show", "node", "-o", node], capture_output=True, text=True
    ).stdout
    match = re.search(r"NodeAddr=(\S+)", out)
    return match.group(1) if match else node


def jupyter_plan(
    site: Site, request: LaunchRequest, port: int, token: str, *, dry_run: bool = False
) -> Plan:
    """The Jupyter job's plan: one JupyterLab process on one node, listening on `port`."""
    root_dir = request.workdir or runtimes.working_directory()
    if not dry_run:  # IPython runs the startup files of its profile: nobody else may write there
        private_folder(Path(root_dir), TOOL_FOLDER, "Jupyter's IPython profile")
    req = jupyter_request(request, port, token, root_dir, site.jupyter_interface)
    python = site.runtime_for(req.runtime).python
    req = replace(req, script=python if python.startswith("/") else req.script)
    machine = None if dry_run else ThisMachine()
    return plan(site, req, "jupyter", dry_run=dry_run, machine=machine)


def start(
    site: Site,
    request: LaunchRequest,
    reporter: Reporter,
    *,
    timeout: float = 300,
    poll: float = 0.5,
) -> JupyterSession:
    """Submit the Jupyter job, wait until the server answers in its log, return how to reach it.

    Ctrl-C while waiting cancels the job (nobody has its URL yet), as does the timeout.
    """
    port = random_port()
    token = new_token()
    launch = jupyter_plan(site, request, port, token)
    reporter.warn(launch.warnings)
    # private: the log shows the token
    with submitted_job(launch, reporter, private=True, ask=False) as job_id:
        return _wait_for_server(site, job_id, port, token, reporter, timeout=timeout, poll=poll)


def _wait_for_server(
    site: Site,
    job_id: str,
    port: int,
    token: str,
    reporter: Reporter,
    *,
    timeout: float,
    poll: float,
) -> JupyterSession:
    deadline = time.monotonic() + timeout
    last_state = None
    while True:
        job = slurm.job_info(job_id)
        if job is None:
            raise StepFailed(f"job {job_id}: Slurm lost the Jupyter job")
        if job.state != last_state:
            reporter.status(f"job {job_id} {job.state}")
            last_state = job.state
        if job.finished:
            raise StepFailed(
                f"job {job_id} ended ({job.state}) before Jupyter started: see {slurm.output_path(job)}"
            )
        host = listening_host(job, port) if job.state == "RUNNING" else None
        if host is not None:
            node = job.nodes
            # on a named interface Jupyter listens on that address only: the tunnel goes there
            bound = site.jupyter_interface is not None and host not in LOOPBACK
            return JupyterSession(
                job_id=job_id,
                node=node,
                node_addr=host if bound else _node_addr(node),
                port=port,
                token=token,
                login_host=site.login_host or _this_host(),
                user=slurm.current_user(),
                tunnel_host=host if bound else "",
            )
        if time.monotonic() > deadline:
            slurm.cancel(job_id)
            raise StepFailed(
                f"job {job_id}: Jupyter did not start within {timeout:.0f} s; cancelled"
            )
        time.sleep(poll)


def server_ready(job: Job, port: int) -> bool:
    """True once the job's log shows Jupyter's URL with our port."""
    return listening_host(job, port) is not None


def listening_host(job: Job, port: int) -> str | None:
    """The host of Jupyter's URL with our port in the job's log (another than loopback when it
    prints several), or None while there is none."""
    pattern = ready_pattern(port)
    hosts: list[str] = []
    for path in slurm.log_paths(job):
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UserError(f"cannot read the Jupyter job's log {path}: {exc.strerror}") from None
        hosts += [m[1] for m in pattern.finditer(text)]
    return next((h for h in hosts if h not in LOOPBACK), hosts[0] if hosts else None)


def _this_host() -> str:
    return socket.getfqdn()


def stop(job_id: str) -> None:
    if not ascii_digits(job_id):
        raise UserError(f"--stop: {job_id!r} is not a job id (allowed: digits)")
    slurm.cancel(job_id)
