"""Pure parts of the job control and preflight: parsing Slurm's output, exit codes, facts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hvd_container.errors import UserError
from launcher import gloo, jupyter, preflight
from launcher.compose import LaunchRequest
from launcher.local_runtime import image_env
from launcher.slurm import Job, job_from_scontrol, output_path, parse_scontrol

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
    assert preflight.parse_mpi_list(text) == ["pmix", "none", "cray_shasta", "pmi2", "pmix_v4"]


def test_an_mpi_plugin_srun_lacks_is_refused_with_the_list() -> None:
    with pytest.raises(UserError, match=r"--mpi=pmi2: .*\(allowed: pmix, none\)"):
        preflight.check_mpi_plugin("pmi2", ["pmix", "none"])
    preflight.check_mpi_plugin("pmix", ["pmix", "none"])
    preflight.check_mpi_plugin("pmi2", None)  # no srun here: nothing to check against


def test_facts_from_build_labels() -> None:
    facts = preflight.facts_from_labels(
        {
            "org.hvd-container.recipe.name": "cpu-bookworm",
            "org.hvd-container.arch": "amd64",
            "org.hvd-container.horovod.controllers": "MPI, gloo",
            "unrelated": "x",
        },
        "image x.sif",
    )
    assert facts is not None
    assert facts.controllers == ("mpi", "gloo") and facts.arch == "amd64"
    # the built-in recipe of that name knows its MPI's PMI flavour
    assert facts.mpi_pmi == ("pmix",)


def test_no_build_labels_means_no_facts() -> None:
    assert preflight.facts_from_labels({"maintainer": "x"}, "image y") is None


def test_facts_from_an_image_directory(tmp_path: Path) -> None:
    meta = tmp_path / ".singularity.d"
    meta.mkdir()
    (meta / "labels.json").write_text(
        json.dumps({"org.hvd-container.arch": "ppc64le", "org.hvd-container.mpi.pmi": "pmi2"})
    )
    facts = preflight.image_facts(str(tmp_path))
    assert facts is not None and facts.arch == "ppc64le" and facts.mpi_pmi == ("pmi2",)


def test_a_missing_image_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="nope.sif: no such file or directory"):
        preflight.require_image_file(str(tmp_path / "nope.sif"), "apptainer")
    preflight.require_image_file("docker:user/img:1", "shifter")  # a registry reference


def test_image_env_from_the_sif_writer_script(tmp_path: Path) -> None:
    env_dir = tmp_path / ".singularity.d" / "env"
    env_dir.mkdir(parents=True)
    (env_dir / "10-docker2singularity.sh").write_text(
        "#!/bin/sh\n# comment\nexport PATH='/opt/venv/bin:/usr/bin'\nexport GREETING='a b'\n"
    )
    assert image_env(tmp_path) == {"PATH": "/opt/venv/bin:/usr/bin", "GREETING": "a b"}


def test_gloo_wrapper_runs_the_script_with_the_image_python() -> None:
    script, args = gloo.wrap_program("/opt/venv/bin/python", "train.py", ["--epochs", "2"])
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
    assert gloo.check_layout(4, 2, None) is not None
    assert gloo.check_layout(None, 2, 2) is None


def test_jupyter_token_is_random_and_not_on_the_command_line() -> None:
    request = LaunchRequest(script="jupyter", image="x.sif")
    req = jupyter.jupyter_request(request, 23456, "s3cret-token", "/scratch/me")
    assert req.env["JUPYTER_TOKEN"] == "s3cret-token"
    assert not any("s3cret-token" in a for a in req.args)
    assert "--port=23456" in req.args and req.nodes == 1 and req.ntasks_per_node == 1
    ports = {jupyter.random_port() for _ in range(20)}
    assert len(ports) > 1 and all(20000 <= p < 60000 for p in ports)
