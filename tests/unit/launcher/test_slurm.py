"""Pure parts of the job control and preflight: parsing Slurm's output, exit codes, facts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _fake_slurm import FakeSlurm
from hvd_container.containers.sif.environment import image_env
from hvd_container.launcher import runtimes
from hvd_container.launcher.controllers import gloo
from hvd_container.launcher.plan.image import builtin_recipe_facts, read_facts
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.run import jupyter
from hvd_container.launcher.sites import machine
from hvd_container.launcher.sites.loader import load_site
from hvd_container.launcher.slurm import Job, job_from_scontrol, output_path, parse_scontrol

from hvd_container.facts import facts_from_labels

SCONTROL = (
    "JobId=8 JobName=my job UserId=alice(1000) GroupId=alice(1000) JobState=FAILED "
    "Reason=NonZeroExitCode Dependency=(null) ExitCode=3:0 RunTime=00:00:02 "
    "NodeList=node[1-2] BatchHost=node1 WorkDir=/scratch/alice/run "
    "StdErr=/scratch/alice/run/train_8.err StdIn=/dev/null StdOut=train_8.out Power="
)


def test_scontrol_line_keeps_values_with_spaces() -> None:
    fields = parse_scontrol(SCONTROL)
    assert fields["JobName"] == "my job"
    assert fields["ExitCode"] == "3:0"
    assert fields["Power"] == ""


def test_job_record_from_scontrol() -> None:
    job = job_from_scontrol(parse_scontrol(SCONTROL))
    assert (job.job_id, job.state, job.exit_status, job.signal) == ("8", "FAILED", 3, 0)
    assert job.user == "alice" and job.nodes == "node[1-2]" and job.finished
    assert job.exit_code == 3
    assert output_path(job) == Path("/scratch/alice/run/train_8.out")


@pytest.mark.parametrize(
    ("state", "status", "signal", "code"),
    [
        ("COMPLETED", 0, 0, 0),
        ("FAILED", 2, 0, 2),
        ("CANCELLED", 0, 15, 143),
        ("CANCELLED", 0, 0, 130),
        ("TIMEOUT", 0, 0, 1),
        ("NODE_FAIL", None, None, 1),
    ],
)
def test_exit_code_of_a_finished_job(
    state: str, status: int | None, signal: int | None, code: int
) -> None:
    assert Job("1", "x", state, status, signal).exit_code == code


def test_pending_and_running_are_not_finished() -> None:
    assert not Job("1", "x", "PENDING", None, None).finished
    assert not Job("1", "x", "RUNNING", 0, 0).finished


def test_mpi_list_parsing_of_slurm_22_05_output() -> None:
    text = (
        "MPI plugin types are...\n\tpmix\n\tnone\n\tcray_shasta\n\tpmi2\n"
        "specific pmix plugin versions available: pmix_v4\n"
    )
    assert machine.parse_mpi_list(text) == ["pmix", "none", "cray_shasta", "pmi2", "pmix_v4"]


class _Srun(machine.ThisMachine):
    """Stands in for this machine's `srun --mpi=list` (labelled: the real one is asked in e2e)."""

    def __init__(self, offered: list[str] | None) -> None:
        super().__init__()
        self.__dict__["srun_mpi_plugins"] = offered


def _srun_check(mpi: str, offered: list[str] | None) -> tuple[str, str]:
    from hvd_container.launcher.plan.planner import plan

    request = LaunchRequest(script="t.py", image="x.sqfs", runtime="none", ntasks=2, mpi=mpi)
    results = plan(
        load_site("local"), request, keep_going=True, dry_run=True, machine=_Srun(offered)
    ).results
    (found,) = [r for r in results if r.check == "srun-mpi"]
    return found.status, found.message


def test_an_mpi_plugin_srun_lacks_is_refused_with_the_list() -> None:
    status, message = _srun_check("pmi2", ["pmix", "none"])
    assert status == "fail" and re.match(r"--mpi=pmi2: .*\(allowed: pmix, none\)", message)
    assert _srun_check("pmix", ["pmix", "none"])[0] == "pass"
    # no srun here: nothing to check against, and it says so
    assert _srun_check("pmi2", None) == (
        "skip",
        "srun is not here: its MPI plugins are not checked",
    )


def test_facts_from_build_labels() -> None:
    facts = facts_from_labels(
        {
            "org.hvd-container.recipe.name": "cpu-bookworm",
            "org.hvd-container.arch": "amd64",
            "org.hvd-container.horovod.controllers": "MPI, gloo",
            "unrelated": "x",
        },
        "image x.sif",
        recipe_lookup=builtin_recipe_facts,
    )
    assert facts is not None
    assert facts.controllers == ("mpi", "gloo") and facts.arch == "amd64"
    # the built-in recipe of that name knows its MPI's PMI flavour
    assert facts.mpi_pmi == ("pmix",)


def test_no_build_labels_means_no_facts() -> None:
    assert facts_from_labels({"maintainer": "x"}, "image y") is None


def test_facts_from_an_image_directory(tmp_path: Path) -> None:
    meta = tmp_path / ".singularity.d"
    meta.mkdir()
    (meta / "labels.json").write_text(
        json.dumps({"org.hvd-container.arch": "ppc64le", "org.hvd-container.mpi.pmi": "pmi2"})
    )
    facts = read_facts(str(tmp_path), ask_docker=False)
    assert facts is not None and facts.arch == "ppc64le" and facts.mpi_pmi == ("pmi2",)


def test_a_missing_image_file_is_refused(tmp_path: Path) -> None:
    apptainer = runtimes.runtime(runtimes.default_profile("apptainer"))
    problem = apptainer.missing_image(str(tmp_path / "nope.sif"), "--image")
    assert problem is not None and "nope.sif: no such file or directory" in problem
    shifter = runtimes.runtime(runtimes.default_profile("shifter"))
    assert shifter.missing_image("docker:user/img:1", "--image") is None  # a registry reference


def test_image_env_from_the_sif_writer_script(tmp_path: Path) -> None:
    env_dir = tmp_path / ".singularity.d" / "env"
    env_dir.mkdir(parents=True)
    (env_dir / "10-docker2singularity.sh").write_text(
        "#!/bin/sh\n# comment\nexport PATH='/opt/venv/bin:/usr/bin'\nexport GREETING='a b'\n"
    )
    assert image_env(tmp_path) == {"PATH": "/opt/venv/bin:/usr/bin", "GREETING": "a b"}


# What Apptainer and SingularityCE write for a Docker image's ENV (insertEnv in
# internal/pkg/build/sources/conveyorPacker_oci.go): PATH as `export PATH=%q`, every other
# entry as `export X="${X:-%q}"`, an entry without '=' as `export X="${X:-}"`; %q is Go's
# quoting of the value after shell.Escape (backslash, ", ` and $ get a backslash).
APPTAINER_ENV = r"""#!/bin/sh
export PATH="/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export NVIDIA_VISIBLE_DEVICES="${NVIDIA_VISIBLE_DEVICES:-"all"}"
export CUDA_VERSION="${CUDA_VERSION:-"11.7.1"}"
export NCCL_NET="${NCCL_NET:-"AWS Libfabric"}"
export EMPTY="${EMPTY:-}"
export TABBED="${TABBED:-"a\tb"}"
export WINDOWS="${WINDOWS:-"C:\\\\dir"}"
export PROMPT="${PROMPT:-"\\$ \\\"quoted\\\" \\`x\\`"}"
export LABEL="${LABEL:-"café\u00a0✓"}"
export GREETING="${GREETING:-"café ✓"}"
"""

# the values Docker gives these variables
APPTAINER_EXPECTED = {
    "PATH": "/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "NVIDIA_VISIBLE_DEVICES": "all",
    "CUDA_VERSION": "11.7.1",
    "NCCL_NET": "AWS Libfabric",
    "EMPTY": "",
    "TABBED": "a\tb",
    "WINDOWS": "C:\\dir",
    "PROMPT": '$ "quoted" `x`',
    "LABEL": "caf\u00e9\u00a0\u2713",
    "GREETING": "café ✓",
}


def _env_dir(root: Path, docker: str | None = None, definition: str | None = None) -> Path:
    env_dir = root / ".singularity.d" / "env"
    env_dir.mkdir(parents=True)
    if docker is not None:
        (env_dir / "10-docker2singularity.sh").write_text(docker)
    if definition is not None:
        (env_dir / "90-environment.sh").write_text(definition)
    return root


def test_image_env_from_apptainers_docker_env_script(tmp_path: Path) -> None:
    warnings: list[str] = []
    assert image_env(_env_dir(tmp_path, APPTAINER_ENV), warnings) == APPTAINER_EXPECTED
    assert warnings == []


def test_image_env_agrees_with_sh_for_plain_values(tmp_path: Path) -> None:
    """Sourced by sh (as Apptainer's action scripts do), values without escapes come out the
    same. (With escapes sh sees Apptainer's double escaping; Docker's value is the one meant.)"""
    plain = [line for line in APPTAINER_ENV.splitlines() if "\\" not in line]
    root = _env_dir(tmp_path, "\n".join(plain) + "\n")
    script = root / ".singularity.d" / "env" / "10-docker2singularity.sh"
    done = subprocess.run(
        ["sh", "-c", f". {script} && exec env -0"], capture_output=True, text=True, env={}
    )
    assert done.returncode == 0, done.stderr
    from_sh = dict(item.split("=", 1) for item in done.stdout.split("\0") if item)
    parsed = image_env(root)
    assert set(parsed) == {
        "PATH",
        "NVIDIA_VISIBLE_DEVICES",
        "CUDA_VERSION",
        "NCCL_NET",
        "EMPTY",
        "GREETING",
    }
    assert parsed == {name: from_sh[name] for name in parsed}


def test_image_env_default_gives_way_to_an_earlier_value(tmp_path: Path) -> None:
    root = _env_dir(
        tmp_path,
        "export NCCL_DEBUG='WARN'\n"
        'export NCCL_DEBUG="${NCCL_DEBUG:-"INFO"}"\n'
        "export OMP_NUM_THREADS=\n"
        'export OMP_NUM_THREADS="${OMP_NUM_THREADS:-"4"}"\n',
    )
    assert image_env(root) == {"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": "4"}


def test_image_env_reads_the_definitions_exports_after_the_docker_env(tmp_path: Path) -> None:
    # 90-environment.sh as Apptainer writes it: its header, then the %environment section
    # (here the one `hvd-container render --format singularity` gives cpu-bookworm)
    root = _env_dir(
        tmp_path,
        'export PATH="/usr/local/bin:/usr/bin:/bin"\n',
        "#!/bin/sh\n# Custom environment shell code should follow\n\n"
        "export VIRTUAL_ENV=/opt/venv\n"
        "export PATH=/opt/venv/bin:$PATH\n"
        'export OMPI_ALLOW_RUN_AS_ROOT="1"\n'
        "export GREETING='it'\"'\"'s ${HOME}'  # a comment\n"
        'export PY_HOME="${VIRTUAL_ENV}/lib"\n',
    )
    warnings: list[str] = []
    assert image_env(root, warnings) == {
        "PATH": "/opt/venv/bin:/usr/local/bin:/usr/bin:/bin",
        "VIRTUAL_ENV": "/opt/venv",
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "GREETING": "it's ${HOME}",
        "PY_HOME": "/opt/venv/lib",
    }
    assert warnings == []


def test_image_env_skips_lines_it_cannot_parse_with_one_line_warnings(tmp_path: Path) -> None:
    root = _env_dir(
        tmp_path,
        'export GOOD="${GOOD:-"1"}"\nexport BROKEN="${BROKEN:-"unterminated}"\n',
        "export LD_LIBRARY_PATH=/opt/lib:$LD_LIBRARY_PATH\n"
        "export HOST=$(hostname)\n"
        'if [ -z "$X" ]; then X=1; fi\n'
        "export AFTER=ok\n",
    )
    warnings: list[str] = []
    assert image_env(root, warnings) == {"GOOD": "1", "AFTER": "ok"}
    docker, definition = (
        "/.singularity.d/env/10-docker2singularity.sh",
        "/.singularity.d/env/90-environment.sh",
    )
    assert [w.split(": ")[1] for w in warnings] == [
        f"{docker}:2",
        f"{definition}:1",
        f"{definition}:2",
        f"{definition}:3",
    ]
    assert all(
        "\n" not in w and w.endswith("not passed to ch-run; set it with --env if the job needs it")
        for w in warnings
    )
    assert "refers to $LD_LIBRARY_PATH, which the image does not set before it" in warnings[1]
    assert "uses shell expansion other than $NAME or ${NAME}" in warnings[2]
    assert "is not `export NAME=VALUE`" in warnings[3]


def wrap_program(python: str, script: str, args: list[str]) -> tuple[str, list[str]]:
    """(program, its arguments) of the Gloo controller's argv for `python script args`."""
    argv = gloo.Gloo().program(python, script, args)
    return argv[0], argv[1:]


def test_gloo_wrapper_runs_the_script_with_the_image_python() -> None:
    script, args = wrap_program("/opt/venv/bin/python", "train.py", ["--epochs", "2"])
    assert script == "/bin/sh" and args[0] == "-c"
    assert args[-4:] == ["/opt/venv/bin/python", "train.py", "--epochs", "2"]
    assert "RendezvousServer" in args[3]
    for name in ("HOROVOD_RANK", "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_CONTROLLER=gloo"):
        assert name in args[1]


FAKE_PSUTIL = """
import socket
from types import SimpleNamespace as NS
NICS = {"lo": "127.0.0.1", "docker0": "172.17.0.1", "eth0": "192.168.1.5", "ib0": "10.1.2.3", "eth1": None}
def net_if_stats():
    return {n: NS(isup=n != "eth1") for n in NICS}
def net_if_addrs():
    return {n: [NS(family=socket.AF_INET, address=a)] if a else [] for n, a in NICS.items()}
"""


@pytest.mark.parametrize(
    ("node_name", "expected"),
    [("10.1.2.3", "ib0"), ("192.168.1.5", "eth0"), ("localhost", "eth0")],
    ids=["node-address-on-ib0", "node-address-on-eth0", "no-match-skips-docker0"],
)
def test_gloo_interface_is_the_one_holding_the_node_address(
    tmp_path: Path, node_name: str, expected: str
) -> None:
    # A stand-in psutil (the image's python has the real one) lists the interfaces.
    (tmp_path / "psutil.py").write_text(FAKE_PSUTIL)
    done = subprocess.run(
        [sys.executable, "-c", gloo.IFACE_CODE],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "SLURMD_NODENAME": node_name, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_gloo_needs_a_uniform_layout() -> None:
    assert gloo.layout_problem(4, 2, None) is not None
    assert gloo.layout_problem(None, 2, 2) is None


def test_jupyter_token_is_random_and_not_on_the_command_line() -> None:
    request = LaunchRequest(script="jupyter", image="x.sif")
    req = jupyter.jupyter_request(request, 23456, "s3cret-token", "/scratch/me")
    assert req.env["JUPYTER_TOKEN"] == "s3cret-token"
    assert not any("s3cret-token" in a for a in req.args)
    assert "--port=23456" in req.args and req.nodes == 1 and req.ntasks_per_node == 1
    ports = {jupyter.random_port() for _ in range(20)}
    assert len(ports) > 1 and all(20000 <= p < 32768 for p in ports)  # below the ephemeral ones


# The end of a task's program: task 0 ends (and its wrapper removes the address file) only after
# task 1's program started, so after task 1's wrapper read the file, as Horovod's init holds
# task 0 until every task joined (without it, task 0 once cleaned up between two of task 1's
# polls, and task 1 waited for a file that was gone).
TASK_1_FIRST = """\
import pathlib, time
started = pathlib.Path(__file__).with_name("task-1-started")
if os.environ["HOROVOD_RANK"] == "1":
    started.touch()
deadline = time.monotonic() + 15
while os.environ["HOROVOD_RANK"] == "0" and not started.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
"""


def _gloo_step(
    tmp_path: Path,
    server_code: str,
    script: Path,
    per_rank: dict[int, dict[str, str]] | None = None,
) -> list[tuple[int, str, str]]:
    """Tasks 1 and 0 of a 2-task step run the Gloo wrapper with sh, as srun would start them;
    (exit code, stdout, stderr) of each, killed after 20 s (the wrapper's own wait is 120 s).
    per_rank: variables that differ from one node layout to another."""
    _, args = wrap_program(sys.executable, str(script), [])
    args[3] = server_code
    tasks = []
    for rank in (1, 0):
        env = {
            "PATH": "/usr/bin:/bin", "SLURM_PROCID": str(rank), "SLURM_JOB_ID": "7",
            "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2",
            "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0", "SLURM_STEP_NUM_NODES": "1",
            "HOROVOD_GLOO_IFACE": "lo", "HVD_GLOO_DIR": str(tmp_path / "rdv"),
            **(per_rank or {}).get(rank, {}),
        }  # fmt: skip
        tasks.append(
            subprocess.Popen(
                ["sh", *args], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )  # fmt: skip
        )
    try:
        outputs = [task.communicate(timeout=20) for task in tasks]
        return [(task.returncode, *output) for task, output in zip(tasks, outputs, strict=True)]
    finally:
        for task in tasks:
            task.kill()
            task.wait()


def test_gloo_tasks_stop_at_once_when_the_rendezvous_server_dies(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("print('trained')\n")
    crash = "import sys; sys.exit('no horovod here')"
    message = "hvd-container gloo: Horovod's rendezvous server on task 0 exited with code 1 before it started; see task 0's error\n"
    assert _gloo_step(tmp_path, crash, script) == [
        (1, "", message),
        (1, "", f"no horovod here\n{message}"),
    ]


def test_gloo_tasks_read_the_published_address(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text(
        "import os\nprint(os.environ['HOROVOD_RANK'], os.environ['HOROVOD_GLOO_RENDEZVOUS_ADDR'],"
        " os.environ['HOROVOD_GLOO_RENDEZVOUS_PORT'])\n" + TASK_1_FIRST
    )
    publish = (
        "import os, time\nt = os.environ['HVD_GLOO_FILE']\n"
        "open(t + '.tmp', 'w').write('127.0.0.1 4321\\n'); os.replace(t + '.tmp', t)\n"
        "time.sleep(60)\n"
    )
    results = _gloo_step(tmp_path, publish, script)
    assert results == [(0, "1 127.0.0.1 4321\n", ""), (0, "0 127.0.0.1 4321\n", "")]
    assert list((tmp_path / "rdv").iterdir()) == []  # task 0 removed the address file


def test_gloo_server_learns_the_nodes_in_step_order_without_a_hostlist(tmp_path: Path) -> None:
    # names Slurm hostlists write as n[1-2]-ib: the old expander in the image read "-ib" as a node
    script = tmp_path / "t.py"
    script.write_text("import os\nprint(os.environ['HOROVOD_HOSTNAME'])\n" + TASK_1_FIRST)
    start = gloo.SERVER_CODE.index("def node_names")
    function = gloo.SERVER_CODE[start : gloo.SERVER_CODE.index("def per_node")]
    server = (
        "import os, sys, time\n" + function + "t = os.environ['HVD_GLOO_FILE']\n"
        "names = node_names(t + '.nodes', int(os.environ['SLURM_STEP_NUM_NODES']))\n"
        "open(str(t) + '-names', 'w').write(','.join(names))\n"
        "open(t + '.tmp', 'w').write('127.0.0.1 4321\\n'); os.replace(t + '.tmp', t)\n"
        "time.sleep(60)\n"
    )
    two_nodes = {
        rank: {"SLURMD_NODENAME": f"n{rank + 1}-ib", "SLURM_NODEID": str(rank),
               "SLURM_LOCALID": "0", "SLURM_STEP_NUM_NODES": "2",
               "SLURM_STEP_NODELIST": "n[1-2]-ib", "SLURM_STEP_TASKS_PER_NODE": "1(x2)"}
        for rank in (0, 1)
    }  # fmt: skip
    results = _gloo_step(tmp_path, server, script, two_nodes)
    assert results == [(0, "n2-ib\n", ""), (0, "n1-ib\n", "")]
    assert (tmp_path / "rdv" / "gloo-7.0-names").read_text() == "n1-ib,n2-ib"
    assert [p.name for p in (tmp_path / "rdv").iterdir()] == ["gloo-7.0-names"]  # the rest removed


ODD_NAME = "odd | name ü x=y"


def test_a_job_name_with_pipes_equals_and_unicode_survives_scontrol() -> None:
    line = (
        f"JobId=5 JobName={ODD_NAME} UserId=me(1000) GroupId=me(1000) JobState=RUNNING "
        "NodeList=n[1-2]-ib WorkDir=/home/me/a b StdOut=/home/me/a b/x.out ExitCode=0:0"
    )
    job = job_from_scontrol(parse_scontrol(line))
    assert (job.name, job.user, job.state, job.nodes) == (ODD_NAME, "me", "RUNNING", "n[1-2]-ib")
    assert job.workdir == "/home/me/a b" and job.stdout == "/home/me/a b/x.out"


# one job of `squeue --json` as Slurm 22.05 prints it (trimmed), and as 23.02 on print it
SQUEUE_22_05 = {
    "job_id": 12, "name": ODD_NAME, "job_state": "RUNNING", "user_name": "me",
    "nodes": "n[1-2]-ib", "state_reason": "None", "start_time": 1000, "end_time": 1000 + 3600,
}  # fmt: skip
SQUEUE_23_02 = {
    "job_id": 13, "name": "queued", "job_state": ["PENDING"], "user_name": "me", "nodes": "",
    "state_reason": "Resources", "start_time": {"set": True, "infinite": False, "number": 0},
    "end_time": {"set": True, "infinite": False, "number": 0},
}  # fmt: skip


def test_squeue_json_records_of_both_shapes() -> None:
    from hvd_container.launcher.slurm import job_from_json

    running = job_from_json(SQUEUE_22_05, now=1000 + 3723)  # end_time is only the limit
    assert (running.job_id, running.name, running.state) == ("12", ODD_NAME, "RUNNING")
    assert (running.nodes, running.reason, running.elapsed) == ("n[1-2]-ib", "", "1:02:03")
    queued = job_from_json(SQUEUE_23_02, now=5000)
    assert (queued.state, queued.reason, queued.nodes, queued.elapsed) == (
        "PENDING", "Resources", "", "0:00"
    )  # fmt: skip
    done = job_from_json({**SQUEUE_22_05, "job_state": "COMPLETED"}, now=99999)
    assert done.elapsed == "1:00:00" and done.finished


def test_list_jobs_reads_json_filters_by_user_and_falls_back_to_text(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from hvd_container.launcher import slurm

    other = {**SQUEUE_22_05, "job_id": 14, "user_name": "someone"}
    listing = json.dumps({"jobs": [SQUEUE_22_05, SQUEUE_23_02, other]})
    calls: list[list[str]] = []

    def fake_squeue(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        # a stand-in for squeue: JSON, or (an older Slurm) an error for --json
        calls.append(argv)
        if "--json" in argv:
            return subprocess.CompletedProcess(argv, 0 if json_ok else 1, listing, "")
        text = f"12|RUNNING|1:02:03|2|n[1-2]-ib|me|{ODD_NAME}\n"
        return subprocess.CompletedProcess(argv, 0, text, "")

    bin_dir = tmp_path / "bin"  # squeue is found on PATH; what it prints is the stand-in's
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\n")
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(subprocess, "run", fake_squeue)
    real = slurm.SlurmCommands()
    json_ok = True
    assert [j.job_id for j in real.jobs("me", finished=True)] == ["12", "13"]
    json_ok = False
    (job,) = real.jobs("me", finished=False)
    assert (job.name, job.nodes, job.elapsed) == (ODD_NAME, "n[1-2]-ib", "1:02:03")
    assert calls[-1][-1] != "all"  # --active: squeue's own default states


def test_srun_lines_of_failed_tasks_name_the_task_and_node() -> None:
    from hvd_container.launcher.slurm import failed_tasks

    text = (
        "epoch 1\n"
        "srun: error: node2: task 1: Exited with exit code 3\n"
        "srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
        "slurmstepd: error: *** STEP 60.0 ON node1 CANCELLED AT 2026-11-24T22:40:01 ***\n"
        "srun: error: node1: tasks 0,2-3: Killed\n"
        "srun: error: node2: task 1: Exited with exit code 3\n"  # said twice: once here
        "srun: error: node3: task 5: Segmentation fault (core dumped)\n"
    )
    assert failed_tasks(text) == [
        "task 1 on node2: Exited with exit code 3",
        "tasks 0,2-3 on node1: Killed",
        "task 5 on node3: Segmentation fault (core dumped)",
    ]
    assert failed_tasks("srun: error: Unable to create step\nsrun: error: x: y\n") == []


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([], "--kill-on-bad-exit=1"),
        (["--kill-on-bad-exit=0"], None),  # a site that chose otherwise keeps its choice
        (["-K0"], None),
        (["-K"], None),
    ],
)
def test_every_srun_line_ends_the_step_when_a_rank_dies(
    options: list[str], expected: str | None
) -> None:
    from hvd_container.launcher.plan.planner import plan
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.loader import load_site

    site = load_site("local")
    site = site.model_copy(
        update={"scheduler": site.scheduler.model_copy(update={"srun_options": options})}
    )
    request = LaunchRequest(script="t.py", image="x.sqfs", nodes=2, ntasks_per_node=1)
    done = plan(site, request, "run", dry_run=True)
    kill = [o for o in done.step if o.startswith(("-K", "--kill-on-bad-exit"))]
    assert kill == ([expected] if expected else options)


@pytest.mark.parametrize("answer", [True, False])
def test_sigterm_cancels_the_job_without_asking(answer: bool, fake_slurm: FakeSlurm) -> None:
    from hvd_container.launcher import slurm
    from hvd_container.launcher.report import Reporter

    from hvd_container.core.errors import Terminated

    cancelled = fake_slurm.cancelled
    asked: list[str] = []

    class Asking(Reporter):
        def confirm(self, question: str) -> bool | None:
            asked.append(question)
            return answer

    with pytest.raises(Terminated), slurm.cancel_on_interrupt("42", Asking()):
        raise Terminated
    assert cancelled == ["42"] and asked == []
    with pytest.raises(KeyboardInterrupt), slurm.cancel_on_interrupt("43", Asking()):
        raise KeyboardInterrupt  # Ctrl-C at a terminal: the user is asked
    assert asked == ["cancel job 43 with scancel?"]
    assert cancelled == (["42", "43"] if answer else ["42"])


# what a batch job's stderr holds when node2 stops answering mid-step (slurm-wlm 22.05.8)
NODE_FAIL_LOG = (
    "srun: error: Node failure on node2\n"
    "slurmstepd-node1: error: *** JOB 205 ON node1 CANCELLED AT 2026-11-24T23:37:14 DUE TO NODE"
    " FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\n"
    "srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
    "srun: error: node1: task 0: Terminated\n"
)


def test_a_node_failure_names_the_node_not_the_tasks_it_took_along(
    tmp_path: Path, fake_slurm: FakeSlurm
) -> None:
    from hvd_container.launcher import slurm

    (tmp_path / "t.err").write_text(NODE_FAIL_LOG)
    job = Job("205", "t", "NODE_FAIL", 0, 15, nodes="node[1-2]", stderr="t.err",
              workdir=str(tmp_path))  # fmt: skip
    assert slurm.failure(job).summary == "job 205 NODE_FAIL: node node2 went down"
    assert job.exit_code != 0
    assert fake_slurm.down_asked == []  # srun named it


def test_a_batch_host_that_went_down_is_found_by_asking_slurm(
    tmp_path: Path, fake_slurm: FakeSlurm
) -> None:
    from hvd_container.launcher import slurm

    (tmp_path / "t.err").write_text("epoch 1\n")  # node1 ran srun: nobody wrote its line
    job = Job("206", "t", "NODE_FAIL", 0, 15, nodes="node[1-2]", stderr="t.err",
              workdir=str(tmp_path))  # fmt: skip
    fake_slurm.down = ["node1"]
    assert slurm.failure(job).summary == "job 206 NODE_FAIL: node node1 went down"
    assert fake_slurm.down_asked == ["node[1-2]"]


@pytest.mark.parametrize(
    ("requeue", "lines"),
    [
        (False, ["#SBATCH --no-requeue"]),
        (True, ["#SBATCH --requeue", "#SBATCH --open-mode=append"]),
    ],
)
def test_a_job_is_requeued_only_when_asked_and_then_keeps_its_log(
    requeue: bool, lines: list[str]
) -> None:
    from hvd_container.launcher.plan.planner import plan

    request = LaunchRequest(script="t.py", image="x.sqfs", nodes=2, ntasks_per_node=1,
                            requeue=requeue)  # fmt: skip
    script = plan(load_site("local"), request, "batch", dry_run=True).script or ""
    sbatch = [line for line in script.splitlines() if "requeue" in line or "open-mode" in line]
    assert sbatch == lines


@pytest.mark.parametrize(
    ("log", "code"),
    [
        # rank 0 exited 3 first; --kill-on-bad-exit's SIGTERM ended rank 1 before its own exit 3
        ("srun: error: node1: task 0: Exited with exit code 3\n"
         "srun: error: node2: task 1: Terminated\n", 3),
        ("srun: error: node2: task 1: Killed\nsrun: error: node1: task 0: Terminated\n", 137),
        # nothing but SIGTERM (scancel, a time limit): the job's own code stays
        ("srun: error: node1: tasks 0-1: Terminated\n", 143),
    ],
)  # fmt: skip
def test_run_returns_the_failed_tasks_code_not_the_sigterm_sent_to_the_others(
    tmp_path: Path, log: str, code: int
) -> None:
    from hvd_container.launcher import slurm

    (tmp_path / "t.err").write_text(log)
    job = Job("207", "t", "FAILED", 143, 0, nodes="node[1-2]", stderr="t.err",
              workdir=str(tmp_path))  # fmt: skip
    failed = slurm.failure(job)
    assert failed.exit_code == code
    assert failed.summary is not None and failed.summary.startswith("job 207 FAILED: task")
