"""`hvd-container run/jobs/logs` against the real local Slurm cluster with Charliecloud.

A tiny shell image (the host's dash) stands in for the training image here, so these tests run
in seconds; the Horovod training runs are in test_run_training.py.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.build_fixtures import reaped, started
from tests.e2e.sif_fixtures import ROOT
from tests.e2e.slurm_fixtures import (  # noqa: F401
    charliecloud_runtime,
    cli,
    job_dir,
    shell_dir_image,
    shell_sif,
    slurm_cluster,
)
from tests.unit._gpg_keys import drop_key, new_key

pytestmark = pytest.mark.e2e

PROBE = 'echo "task $SLURM_PROCID on $SLURMD_NODENAME in $PWD: $GREETING"'
# two ranks wait for each other through files in the shared working directory (the image has
# only dash and sleep; a minute at most)
BARRIER = (
    ': > "met.$SLURM_PROCID"; i=0; '
    "until [ -e met.0 ] && [ -e met.1 ] || [ $i -ge 600 ]; do sleep 0.1; i=$((i + 1)); done"
)


@pytest.fixture()
def cluster(slurm_cluster: str, charliecloud_runtime: None) -> None:  # noqa: F811
    return None


def _job_id(stderr: str) -> str:
    match = re.search(r"submitted batch job (\d+)", stderr)
    assert match, stderr
    return match.group(1)


def _state(job_id: str) -> str:
    """The job's final state (waits while Slurm is still cleaning up)."""
    deadline = time.monotonic() + 30
    while True:
        out = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True
        )
        match = re.search(r"JobState=(\S+)", out.stdout)
        state = match.group(1) if match else "?"
        if state not in ("COMPLETING", "RUNNING", "PENDING") or time.monotonic() > deadline:
            return state
        time.sleep(0.2)


def test_run_outside_an_allocation_submits_follows_and_returns_the_exit_code(
    cluster: None,
    shell_dir_image: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    # both ranks print, meet, then exit 3: the first rank out with a bad exit has the other
    # killed (kill-on-bad-exit), which must not come before the other has printed
    result = cli(
        "run", "--site", "local", "--image", str(shell_dir_image), "-N", "2",
        "--ntasks-per-node", "1", "sh", "-c", f"{PROBE}; {BARRIER}; exit 3", cwd=job_dir,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    job_id = _job_id(result.stderr)
    assert f"job {job_id} FAILED (exit code 3)" in result.stderr
    for rank, node in ((0, "node1"), (1, "node2")):
        assert f"task {rank} on {node} in {job_dir}: hello from the image" in result.stdout
    assert (job_dir / f"sh_{job_id}.out").is_file()
    assert _state(job_id) == "FAILED"


# rank 1 dies at once (exit 3, or SIGKILL as the OOM killer does); rank 0 stands for the
# ranks that would wait for it in an allreduce. It execs its wait: the testbed tracks a step's
# processes by parentage (proctrack/linuxproc), and a `sleep` orphaned by its killed shell
# escaped it now and then, holding the step for a minute (a cgroup-tracking site kills it).
DYING_RANK = {
    "exits": 'if [ "$SLURM_PROCID" = 1 ]; then exit 3; fi; exec sleep 300',
    "is killed": 'if [ "$SLURM_PROCID" = 1 ]; then kill -9 $$; fi; exec sleep 300',
}


@pytest.mark.parametrize("how", DYING_RANK)
def test_a_rank_that_dies_ends_the_step_and_is_named(
    how: str,
    cluster: None,
    shell_dir_image: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    # timed from the job's start (rank 1 dies at once): the time it waited in the queue is
    # Slurm's scheduling, not the step's
    with reaped(started(
        "run", "--site", "local", "--image", str(shell_dir_image), "-N", "2",
        "--ntasks-per-node", "1", "sh", "-c", DYING_RANK[how], cwd=job_dir,
    )) as proc:  # fmt: skip
        assert proc.stderr is not None
        said = []
        for line in proc.stderr:
            said.append(line)
            if " RUNNING on " in line:
                break
        running = time.monotonic()
        _out, rest = proc.communicate(timeout=120)
    took = time.monotonic() - running
    err = "".join(said) + rest
    assert took < 30, f"the step ran {took:.0f} s after rank 1 died: {err}"
    assert proc.returncode != 0
    job_id = _job_id(err)
    named = re.search(rf"^job {job_id} FAILED: task 1 on node2: (.+)$", err, re.M)
    assert named, err
    assert ("exit code 3" if how == "exits" else "Killed") in named[1]


def test_every_rank_gets_the_cpus_it_asked_for(cluster: None, job_dir: Path) -> None:  # noqa: F811
    """-c reaches the step, not only the allocation: Slurm 22.05's srun stopped reading
    SLURM_CPUS_PER_TASK, so a step without its own -c gave each rank one CPU there. (This
    testbed's slurm-wlm 22.05.8 still hands the step the allocation's -c, so the test passes
    without the tool's -c too; the batch script's line is checked for it as well.)"""
    probe = (
        'echo "task $SLURM_PROCID: $(scontrol show step $SLURM_JOB_ID.$SLURM_STEP_ID'
        ' | grep -o "CPUs=[0-9]*" | head -n 1)"'
    )
    launch = ["--site", "local", "--runtime", "none", "-N", "1", "--ntasks-per-node", "2",
              "-c", "2", "sh", "-c", probe]  # fmt: skip
    script = cli("batch", *launch, cwd=job_dir)
    assert script.returncode == 0, script.stderr
    step = next(line for line in script.stdout.splitlines() if line.startswith("srun "))
    assert " --cpus-per-task=2 " in step, step
    result = cli("run", *launch, cwd=job_dir)
    assert result.returncode == 0, result.stderr
    for rank in (0, 1):
        assert f"task {rank}: CPUs=4" in result.stdout, result.stdout  # 2 ranks x 2 CPUs


def test_a_site_that_asks_ranks_per_node_with_mincpus_gets_them_evenly(
    cluster: None,
    job_dir: Path,  # noqa: F811
) -> None:
    """ZIH's GPU clusters: the allocation says --ntasks with --mincpus (mincpus x nodes =
    ntasks), never --ntasks-per-node; Slurm still places the ranks two a node, read back from
    the job's record and the ranks' own nodes."""
    local = (ROOT / "launcher" / "sites" / "local.yaml").read_text()
    profile = job_dir / "local-mincpus.yaml"
    profile.write_text(
        local.replace("name: local\n", "name: local-mincpus\n")
        .replace("  gpu_request: none\n", "  gpu_request: gres\n  partition: gpu\n")
        .replace("  gpus_per_node: 0\n", "  gpus_per_node: 2\n  ranks_per_node_as: mincpus\n")
    )
    launch = ["--site", str(profile), "--runtime", "none", "-N", "2", "--env", "GREETING=hi",
              "sh", "-c", PROBE]  # fmt: skip
    script = cli("batch", *launch, cwd=job_dir)
    assert script.returncode == 0, script.stderr
    options = [line for line in script.stdout.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --ntasks=4" in options and "#SBATCH --mincpus=2" in options, options
    assert not any("--ntasks-per-node" in o for o in options), options
    result = cli("run", *launch, cwd=job_dir)
    assert result.returncode == 0, result.stderr
    record = subprocess.run(
        ["scontrol", "show", "job", "-o", _job_id(result.stderr)], capture_output=True, text=True
    ).stdout
    assert "MinCPUsNode=2" in record and "NumTasks=4" in record, record
    for rank, node in ((0, "node1"), (1, "node1"), (2, "node2"), (3, "node2")):
        assert f"task {rank} on {node} in {job_dir}: hi" in result.stdout, result.stdout


def test_run_inside_an_allocation_runs_srun_directly(
    cluster: None,
    shell_dir_image: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    hvd = [sys.executable, "-m", "hvd_container"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        ["salloc", "-N", "2", *hvd, "run", "--site", "local", "--image", str(shell_dir_image),
         "-N", "2", "--ntasks-per-node", "1", "sh", "-c", PROBE],
        capture_output=True, text=True, cwd=job_dir, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "submitted batch job" not in result.stderr
    assert "task 0 on node1" in result.stdout and "task 1 on node2" in result.stdout


def test_salloc_mode_runs_interactively(
    cluster: None,
    shell_dir_image: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.report import Reporter
    from hvd_container.launcher.run import execute
    from hvd_container.launcher.sites.loader import load_site

    request = LaunchRequest(
        script="sh", args=["-c", PROBE], image=str(shell_dir_image), nodes=2, ntasks_per_node=1
    )
    cwd = os.getcwd()
    os.chdir(job_dir)
    try:
        launch = execute.run_plan(load_site("local"), request, salloc=True)
        argv = launch.argv
        assert argv[0] == "salloc" and "--nodes=2" in argv and "srun" in argv
        assert not any(a.startswith("--output") for a in argv[: argv.index("srun")])
        assert execute.execute(launch, Reporter()) == 0
    finally:
        os.chdir(cwd)


def test_detach_then_jobs_and_logs_follow(
    cluster: None,
    shell_dir_image: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    result = cli(
        "run", "--site", "local", "--image", str(shell_dir_image), "-N", "2",
        "--ntasks-per-node", "1", "-J", "detached", "--detach",
        "sh", "-c", "sleep 2; " + PROBE, cwd=job_dir,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job_id = _job_id(result.stderr)
    listing = cli("jobs")
    assert listing.returncode == 0, listing.stderr
    assert re.search(rf"^{job_id}\s+detached\s+(PENDING|RUNNING|COMPLETED)", listing.stdout, re.M)
    followed = cli("logs", "-f", job_id, cwd=job_dir)
    assert followed.returncode == 0, followed.stderr
    assert "task 1 on node2" in followed.stdout
    assert f"job {job_id} COMPLETED" in followed.stderr
    printed = cli("logs", job_id)
    assert "task 0 on node1" in printed.stdout


def test_jobs_and_logs_read_a_job_name_with_pipes_spaces_and_unicode(
    cluster: None,
    job_dir: Path,  # noqa: F811
) -> None:
    from tests._json_records import result

    name = "odd | name ü x=y"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "-J", name, "-N", "2", "-o", "odd_%j.out",
         "--wrap", "srun -l echo hello from $SLURM_JOB_NAME"],
        cwd=job_dir, capture_output=True, text=True, encoding="utf-8",
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    followed = cli("logs", "-f", job_id, cwd=job_dir)  # scontrol's record, name and all
    assert followed.returncode == 0, followed.stderr
    assert f"hello from {name}" in followed.stdout
    listing = cli("jobs")
    assert listing.returncode == 0, listing.stderr
    row = next(line for line in listing.stdout.splitlines() if line.startswith(f"{job_id} "))
    assert f"  {name}  " in row and "COMPLETED" in row and "node[1-2]" in row, row
    as_json = cli("jobs", "--json")
    assert as_json.returncode == 0, as_json.stderr
    job = next(j for j in result("jobs", as_json.stdout)["jobs"] if j["job_id"] == job_id)
    assert (job["name"], job["state"], job["nodes"]) == (name, "COMPLETED", "node[1-2]")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_cancels_the_job(
    signum: int,
    code: int,
    cluster: None,
    shell_dir_image: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    proc = started(
        "run", "--site", "local", "--image", str(shell_dir_image), "-N", "1",
        "--ntasks-per-node", "1", "sh", "-c", "echo started; sleep 300", cwd=job_dir,
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.stdout.readline().strip() != "started":
        pass
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    job_id = _job_id(err)
    assert f"job {job_id} cancelled" in err
    assert _state(job_id) == "CANCELLED"
    queue = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-t", "all"], capture_output=True, text=True
    )
    assert "sleep" not in queue.stdout and " R " not in queue.stdout, queue.stdout


def test_a_node_that_goes_down_ends_the_job_as_node_fail_and_is_named(
    cluster: None,
    shell_dir_image: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    """node2 goes away mid-job as a crashed machine does (its slurmd, slurmstepd and tasks
    SIGKILLed): the job ends NODE_FAIL rather than being requeued to start again, `run` says
    which node and exits non-zero, and `jobs` names the node."""
    proc = started(
        "run", "--site", "local", "--image", str(shell_dir_image), "-N", "2",
        "--ntasks-per-node", "1", "sh", "-c", 'echo "started on $SLURMD_NODENAME"; sleep 300',
        cwd=job_dir,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        running: set[str] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(running) < 2:
            line = proc.stdout.readline()
            if line.startswith("started on "):
                running.add(line.split()[-1])
        assert running == {"node1", "node2"}, running
        crash = subprocess.run(
            ["sh", str(ROOT / "testbed" / "slurm.sh"), "crash", "node2"],
            capture_output=True, text=True,
        )  # fmt: skip
        assert crash.returncode == 0, crash.stderr
        _out, err = proc.communicate(timeout=120)  # SlurmdTimeout=10 s, then a ping round
        assert proc.returncode != 0, err
        job_id = _job_id(err)
        assert re.search(rf"^job {job_id} NODE_FAIL", err, re.M), err
        assert f"job {job_id} NODE_FAIL: node node2 went down" in err, err
        listed = cli("jobs", cwd=job_dir)
        row = next(r for r in listed.stdout.splitlines() if r.startswith(job_id + " "))
        assert "NODE_FAIL" in row and "(down: node2)" in row, row
        queue = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
        )
        assert queue.stdout.strip() in ("", "NODE_FAIL"), queue.stdout  # not requeued
    finally:
        if proc.poll() is None:
            proc.kill()
        # node2 back for the tests after this one (its slurmd starts, the node resumes)
        subprocess.run(["sh", str(ROOT / "testbed" / "slurm.sh"), "up"], capture_output=True)


def test_sif_image_runs_unpacked_with_its_env_and_labels(
    cluster: None,
    shell_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    env = {"HVD_CONTAINER_CACHE": str(cache)}
    result = cli(
        "run", "--site", "local", "--image", str(shell_sif), "-N", "2", "--ntasks-per-node",
        "1", "sh", "-c", PROBE, cwd=job_dir, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # the SIF writer keeps Docker's ENV: GREETING="hello world" from the imported image
    assert "task 1 on node2 in " + str(job_dir) + ": hello world" in result.stdout
    unpacked = [p for p in (cache / "images").iterdir() if p.is_dir() and p.name[0] != "."]
    assert len(unpacked) == 1 and (unpacked[0] / "bin" / "sh").exists()
    # recorded as the tool's own, so prune takes it (and only what was recorded)
    pruned = cli("cache", "prune", env=env)
    assert pruned.returncode == 0 and f"removed {unpacked[0]}\n" in pruned.stdout, pruned.stdout
    assert not unpacked[0].exists()


def test_preflight_refuses_a_missing_image(cluster: None, job_dir: Path) -> None:  # noqa: F811
    result = cli(
        "run", "--site", "local", "--image", str(job_dir / "nope.sif"), "-N", "1", "x.py",
        cwd=job_dir,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "nope.sif: no such file" in result.stderr


def test_preflight_refuses_an_mpi_plugin_srun_lacks(
    cluster: None,
    shell_dir_image: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
) -> None:
    from hvd_container.launcher.sites.machine import ThisMachine

    offered = ThisMachine().srun_mpi_plugins
    assert offered is not None and "pmix" in offered and "pmi2" in offered
    result = cli(
        "run", "--site", "local", "--image", str(shell_dir_image), "--mpi", "pmix_v3",
        "-N", "1", "sh", "-c", "true", cwd=job_dir,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "does not offer it" in result.stderr


def test_preflight_refuses_mpi_launch_of_an_image_without_the_mpi_controller(
    cluster: None,
    shell_dir_image: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    import json
    import shutil

    image = tmp_path / "gloo-only"
    shutil.copytree(shell_dir_image, image, symlinks=True)
    labels = json.loads((image / ".singularity.d" / "labels.json").read_text())
    labels["org.hvd-container.horovod.controllers"] = "gloo"
    (image / ".singularity.d" / "labels.json").write_text(json.dumps(labels))
    result = cli(
        "run", "--site", "local", "--image", str(image), "-N", "2", "--ntasks-per-node", "1",
        "sh", "-c", "true", cwd=job_dir,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "submitted" not in result.stderr
    assert "without the MPI controller" in result.stderr and "--controller gloo" in result.stderr


def test_preflight_refuses_an_arch_mismatch(
    cluster: None,
    shell_dir_image: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    import json
    import shutil

    image = tmp_path / "arm"
    shutil.copytree(shell_dir_image, image, symlinks=True)
    labels = json.loads((image / ".singularity.d" / "labels.json").read_text())
    labels["org.hvd-container.arch"] = "arm64"
    (image / ".singularity.d" / "labels.json").write_text(json.dumps(labels))
    result = cli(
        "run", "--site", "local", "--image", str(image), "-N", "1", "sh", "-c", "true",
        cwd=job_dir,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "built for arm64" in result.stderr


def test_a_signed_sif_runs_and_one_replaced_while_the_job_waited_stops_before_its_step(
    cluster: None,
    shell_sif: Path,  # noqa: F811
    job_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A site that requires signatures: an unsigned SIF is refused before anything is
    submitted, the signed one runs, and its batch script, submitted after the file was
    changed, fails before its step with the line that says why (the real sbatch and bash)."""
    signer = new_key("signer")
    try:
        env = {"GNUPGHOME": str(signer.home), "HVD_CONTAINER_CACHE": str(tmp_path / "cache")}
        profile = job_dir / "local-signed.yaml"
        profile.write_text(
            "extends: local\nname: local-signed\n"
            f"images:\n  signatures:\n    required: true\n    keys: [{signer.public}]\n"
        )
        signed, unsigned = job_dir / "signed.sif", job_dir / "unsigned.sif"
        for copy in (signed, unsigned):
            shutil.copyfile(shell_sif, copy)
        assert cli("sign", str(signed), env=env).returncode == 0
        launch = ["--site", str(profile), "-N", "1", "sh", "-c", PROBE]

        refused = cli("run", "--image", str(unsigned), *launch, cwd=job_dir, env=env)
        assert refused.returncode == 2, refused.stderr
        assert "group 1: not signed: site local-signed requires a signed image" in refused.stderr
        assert "submitted batch job" not in refused.stderr

        ran = cli("run", "--image", str(signed), *launch, cwd=job_dir, env=env)
        assert ran.returncode == 0, ran.stderr
        assert "task 0 on node1 in " + str(job_dir) + ": hello world" in ran.stdout

        script = cli("batch", "--image", str(signed), *launch, cwd=job_dir, env=env)
        assert script.returncode == 0, script.stderr
        with open(signed, "ab") as fh:  # replaced while the job waited in the queue
            fh.write(b"\0")
        (job_dir / "job.sh").write_text(script.stdout)
        submitted = subprocess.run(["sbatch", "--parsable", "job.sh"], cwd=job_dir,
                                   capture_output=True, text=True, check=True)  # fmt: skip
        job_id = submitted.stdout.strip().split(";")[0]
        assert _state(job_id) == "FAILED"
        (error,) = job_dir.glob(f"*_{job_id}.err")
        assert error.read_text() == (
            f"hvd-container: {signed} changed since its signature was checked: not run\n"
        )
    finally:
        drop_key(signer)
