"""--controller torch and torchrun: the rendezvous each task gets before its container starts
(run here with sh and this machine's real `scontrol show hostnames`), the layout, the names
each runtime passes in, the controller a recipe or site declares, and verify's check."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from _launch_helpers import plan_launch, words
from hvd_container.launcher.controllers import _torch, get
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import load_site
from hvd_container.launcher.sites.model import Site

from hvd_container.core.errors import UserError


@pytest.fixture
def scontrol() -> None:
    """Slurm's scontrol expands the hostlist. Asked when the test runs, not when it is
    collected: in the full suite the end-to-end fixtures have installed Slurm by then."""
    if shutil.which("scontrol") is None:
        pytest.skip("Slurm's scontrol expands the hostlist (the full suite installs it)")


needs_scontrol = pytest.mark.usefixtures("scontrol")

TASK = {
    "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "3", "SLURM_STEP_NODELIST": "gpu[07-08],login-x",
    "SLURM_STEP_NUM_TASKS": "7", "SLURM_STEP_NUM_NODES": "3",
    "SLURM_STEP_TASKS_PER_NODE": "3(x2),1",
}  # fmt: skip


def launch_at(controller: str, site: Site | None = None) -> Launch:
    return plan_launch(
        site or load_site("local"),
        LaunchRequest(
            script="t.py", image="x.sqfs", controller=controller, nodes=3, ntasks_per_node=3
        ),
    ).launch


def run_task(
    controller: str, site: Site | None = None, **slurm: str
) -> subprocess.CompletedProcess[str]:
    """One task's wrapper, with `env` standing in for the runtime."""
    argv = get(controller).wrap_task(launch_at(controller, site), ["env"])
    clean = {"PATH": os.environ["PATH"], **TASK, **slurm}
    return subprocess.run(argv, capture_output=True, text=True, env=clean)


def task_env(controller: str, site: Site | None = None, **slurm: str) -> dict[str, str]:
    """The environment the wrapper hands the runtime for one task."""
    done = run_task(controller, site, **slurm)
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


PORT = 20000 + (4242 % 798) * 16 + 3  # TASK's job and step


def ephemeral_ports() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def test_the_chosen_port_is_below_the_ephemeral_ports_for_every_job_and_step() -> None:
    text = (Path(_torch.__file__).parent.parent / "programs" / "torch_rendezvous.sh").read_text()
    assert "MASTER_PORT=$((20000 + (SLURM_JOB_ID % 798) * 16 + ${SLURM_STEP_ID:-0} % 16))" in text
    highest = 20000 + 797 * 16 + 15
    assert highest < 32768 <= ephemeral_ports()[0]  # Linux's default range, and this machine's


@needs_scontrol
def test_a_port_held_on_the_first_node_stops_the_first_task_with_the_port_named() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", PORT))
        held.listen(1)
        done = run_task("torch", SLURM_PROCID="0", SLURM_NODEID="0", SLURM_LOCALID="0")
        assert done.returncode == 1 and done.stdout == ""  # the runtime never started
        assert done.stderr.startswith(f"hvd-container torch: MASTER_PORT {PORT} is taken on ")
        assert f"`ss -tanp sport = :{PORT}` names the program" in done.stderr
        # the first node's other tasks, and other nodes (whose ports are their own), go on
        for nodeid, localid in (("0", "1"), ("1", "0")):
            other = run_task("torch", SLURM_PROCID="1", SLURM_NODEID=nodeid, SLURM_LOCALID=localid)
            assert other.returncode == 0, other.stderr


@needs_scontrol
def test_a_port_the_user_sets_among_the_ephemeral_ones_is_warned_of() -> None:
    low, high = ephemeral_ports()
    done = run_task("torch", SLURM_PROCID="0", SLURM_NODEID="0", SLURM_LOCALID="0",
                    MASTER_PORT=str(low + 1))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"MASTER_PORT {low + 1} is in " in done.stderr and f"ports {low}-{high}" in done.stderr


@needs_scontrol
@pytest.mark.parametrize(
    ("procid", "nodeid", "localid", "local_size"),
    [("0", "0", "0", "3"), ("4", "1", "1", "3"), ("6", "2", "0", "1")],
)
def test_each_task_gets_its_place_and_the_first_node(
    procid: str, nodeid: str, localid: str, local_size: str
) -> None:
    env = task_env("torch", SLURM_PROCID=procid, SLURM_NODEID=nodeid, SLURM_LOCALID=localid)
    assert env["MASTER_ADDR"] == "gpu07"  # Slurm's expansion of gpu[07-08],login-x
    assert env["MASTER_PORT"] == str(20000 + (4242 % 798) * 16 + 3)
    assert (env["RANK"], env["WORLD_SIZE"]) == (procid, "7")
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"]) == (
        localid,
        local_size,
        nodeid,
    )


@needs_scontrol
def test_values_the_user_set_win() -> None:
    env = task_env("torch", SLURM_PROCID="0", SLURM_NODEID="0", SLURM_LOCALID="0",
                   MASTER_PORT="29500", MASTER_ADDR="10.0.0.1")  # fmt: skip
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("10.0.0.1", "29500")


JSC = load_site("local").model_copy(update={"first_node_suffix": "i"})  # JSC's InfiniBand names


def resolving(tmp_path: Path, *names: str) -> str:
    """A PATH whose getent resolves only `names` (the nodes' names as a site's DNS has them)."""
    fake = tmp_path / "getent"
    known = " ".join(names)
    fake.write_text(
        f'#!/bin/sh\ncase " {known} " in *" $2 "*) echo "10.0.0.7 $2";; *) exit 2;; esac\n'
    )
    fake.chmod(0o755)
    return f"{tmp_path}:{os.environ['PATH']}"


@needs_scontrol
@pytest.mark.parametrize("controller", ["torch", "torchrun"])
def test_a_sites_first_node_suffix_makes_the_rendezvous_address(
    controller: str, tmp_path: Path
) -> None:
    path = resolving(tmp_path, "gpu07", "gpu07i")
    env = task_env(controller, JSC, PATH=path, SLURM_PROCID="1", SLURM_NODEID="1",
                   SLURM_LOCALID="0")  # fmt: skip
    assert env["MASTER_ADDR"] == "gpu07i"
    # a batch script's step sets it once for every task, suffix and all; the tasks keep it
    step = get(controller).wrap_step(launch_at(controller, JSC), ["env"])
    clean = {"PATH": path, "SLURM_JOB_NODELIST": "gpu[07-08]"}
    out = subprocess.run(step, capture_output=True, text=True, env=clean, check=True).stdout
    assert "MASTER_ADDR=gpu07i" in out.splitlines()
    kept = task_env(controller, JSC, SLURM_PROCID="1", SLURM_NODEID="1", SLURM_LOCALID="0",
                    MASTER_ADDR="gpu07i")  # fmt: skip
    assert kept["MASTER_ADDR"] == "gpu07i"  # not gpu07ii
    # what a user set is used as set
    mine = task_env(controller, JSC, SLURM_PROCID="1", SLURM_NODEID="1", SLURM_LOCALID="0",
                    MASTER_ADDR="10.0.0.1")  # fmt: skip
    assert mine["MASTER_ADDR"] == "10.0.0.1"


@needs_scontrol
@pytest.mark.parametrize("controller", ["torch", "torchrun"])
def test_a_suffixed_name_that_does_not_resolve_falls_back_and_says_so(
    controller: str, tmp_path: Path
) -> None:
    """JUPITER's `i` suffix is unconfirmed: where the suffixed name does not resolve, the
    rendezvous takes the plain name and says which, instead of an unresolvable host."""
    path = resolving(tmp_path, "gpu07")
    done = run_task(controller, JSC, PATH=path, SLURM_PROCID="1", SLURM_NODEID="1",
                    SLURM_LOCALID="0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "MASTER_ADDR=gpu07" in done.stdout.splitlines()
    assert "gpu07i (the first node with the site's first_node_suffix i) does not resolve on " in (
        done.stderr
    ) and done.stderr.rstrip().endswith(": the rendezvous is gpu07")
    step = get(controller).wrap_step(launch_at(controller, JSC), ["env"])
    clean = {"PATH": path, "SLURM_JOB_NODELIST": "gpu[07-08]"}
    out = subprocess.run(step, capture_output=True, text=True, env=clean, check=True)
    assert "MASTER_ADDR=gpu07" in out.stdout.splitlines() and "does not resolve" in out.stderr


@needs_scontrol
@pytest.mark.parametrize(
    ("options", "first"),
    [
        ([], "gpu07"),
        (["--nodelist=gpu[09-10]"], "gpu09"),
        (["--exclude=gpu[07-08]"], "gpu09"),  # a screened run leaves bad nodes out
        (["-xgpu07", "--exclude=gpu09"], "gpu08"),
        (["-wgpu10"], "gpu10"),
        (["--nodelist=gpu10,gpu08"], "gpu08"),  # rank 0 is on the job's first of them
    ],
)
def test_the_steps_first_node_honours_its_nodelist_and_exclude(
    options: list[str], first: str, tmp_path: Path
) -> None:
    step = get("torch").wrap_step(launch_at("torch"), [])
    srun = ["srun", "--mpi=none", *options, "-N", "2", "-n", "2", "env", "--exclude=gpu10"]
    clean = {"PATH": os.environ["PATH"], "SLURM_JOB_NODELIST": "gpu[07-10]"}
    fake = tmp_path / "srun"  # prints what it would start the step with
    fake.write_text('#!/bin/sh\necho "MASTER_ADDR=$MASTER_ADDR"\n')
    fake.chmod(0o755)
    clean["PATH"] = f"{fake.parent}:{clean['PATH']}"
    out = subprocess.run([*step, *srun], capture_output=True, text=True, env=clean, check=True)
    assert out.stdout.splitlines() == [f"MASTER_ADDR={first}"]


def test_a_first_node_suffix_is_a_name_part_or_refused(tmp_path: Path) -> None:
    local = (Path(_torch.__file__).parents[1] / "sites" / "local.yaml").read_text()
    for bad in ("'i; reboot'", "'$(id)'", "'-i x'", "''"):
        profile = tmp_path / "jsc.yaml"
        profile.write_text(local.replace("name: local\n", f"name: jsc\nfirst_node_suffix: {bad}\n"))
        with pytest.raises(UserError, match=r"jsc.yaml:\d+: first_node_suffix: "):
            load_site(str(profile))


@needs_scontrol
def test_torchrun_gets_its_options_from_the_step() -> None:
    env = task_env("torchrun", SLURM_PROCID="1", SLURM_NODEID="1", SLURM_LOCALID="0")
    assert env["PET_NNODES"] == "3" and env["PET_NPROC_PER_NODE"] == "3"
    assert env["PET_RDZV_BACKEND"] == "c10d" and env["PET_RDZV_ID"] == "4242"
    assert env["PET_RDZV_ENDPOINT"] == f"gpu07:{20000 + (4242 % 798) * 16 + 3}"
    assert env["PET_MAX_RESTARTS"] == "0"
    assert "RANK" not in env  # torchrun gives its ranks their place


def test_outside_a_step_the_task_says_why() -> None:
    argv = get("torch").wrap_task(launch_at("torch"), ["true"])
    done = subprocess.run(argv, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    assert done.stderr.startswith("hvd-container torch: no first node: scontrol show hostnames ")


def test_torchrun_runs_one_task_a_node_and_a_nodes_gpus() -> None:
    result = plan_launch(
        load_site("perlmutter"),
        LaunchRequest(script="t.py", image="u/i:t", controller="torchrun", nodes=2, account="a_g"),
    )
    argv = result.step
    assert argv[argv.index("-N") + 1] == "2" and "--ntasks-per-node=1" in argv
    assert "--gpus-per-node=4" in result.allocation  # the node's ranks are torchrun's: 4 GPUs
    assert argv[-4:] == ["python", "-m", "torch.distributed.run", "t.py"]
    assert "--mpi=none" in argv


def test_podman_hpc_passes_every_rendezvous_variable() -> None:
    argv = plan_launch(
        load_site("perlmutter"),
        LaunchRequest(
            script="t.py",
            image="u/i:t",
            runtime="podman-hpc",
            controller="torch",
            ntasks=8,
            account="a_g",
        ),  # fmt: skip
    ).step
    passed = {argv[i + 1] for i, a in enumerate(argv) if a == "-e"}
    assert set(get("torch").task_env) <= passed
    # the wrapper runs on the node, before podman-hpc starts the container
    assert argv.index("sh") < argv.index("podman-hpc")


def test_neuron_accounts_torch_launches_as_pytorch_ddp(tmp_path) -> None:  # type: ignore[no-untyped-def]
    request = LaunchRequest(script="t.py", image="x.sif", controller="torch", ntasks=8,
                            comment="field=ai")  # fmt: skip
    argv = words(plan_launch(load_site("neuron"), request))
    assert "--comment=field=ai;appl=pytorch-ddp" in argv


def test_the_recipe_or_the_site_declares_the_controller_and_the_flag_wins(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from hvd_container.launcher.plan.request import LaunchOptions, request_from_options

    site, request = request_from_options(
        "t.py", options=LaunchOptions(site="local", recipe="cpu-bookworm-torch", nodes=2)
    )
    assert plan_launch(site, request).launch.controller.name == "torch"
    site, request = request_from_options(
        "t.py",
        options=LaunchOptions(
            site="local", recipe="cpu-bookworm-torch", nodes=2, controller="torchrun"
        ),
    )
    assert plan_launch(site, request).launch.controller.name == "torchrun"
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: local\nname: mine\ncontroller: torchrun\n")
    chosen = plan_launch(
        load_site(str(mine)), LaunchRequest(script="t.py", image="x.sqfs", nodes=2)
    )
    assert chosen.launch.controller.name == "torchrun"
    mine.write_text("extends: local\nname: mine\ncontroller: horovodrun\n")
    with pytest.raises(
        UserError, match=r"controller: 'horovodrun' \(site mine\) is not allowed \(allowed: mpi, "
    ):
        plan_launch(load_site(str(mine)), LaunchRequest(script="t.py", image="x.sqfs", nodes=2))


def test_verify_checks_torch_distributed_where_there_is_no_horovod() -> None:
    from hvd_container.containers.recipe_loader import load_recipe
    from hvd_container.containers.verify import torch_distributed_problems

    cpu, gpu = load_recipe("cpu-bookworm-torch"), load_recipe("gpu-bookworm-torch")
    assert cpu.horovod is None and gpu.horovod is None
    assert torch_distributed_problems(cpu, {"torch.distributed": "gloo"}) == []
    assert torch_distributed_problems(gpu, {"torch.distributed": "gloo,nccl"}) == []
    assert torch_distributed_problems(gpu, {"torch.distributed": "gloo"}) == [
        "torch.distributed has no nccl backend (is_nccl_available() is False; it has gloo)"
    ]
    assert torch_distributed_problems(cpu, {})[0].startswith("torch.distributed is not available")


@needs_scontrol
@pytest.mark.parametrize(("kind", "prefix"), [("apptainer", "APPTAINERENV_"),
                                              ("singularity", "SINGULARITYENV_")])  # fmt: skip
def test_cleanenv_gets_the_rendezvous_under_the_runtimes_prefix(
    tmp_path,
    kind: str,
    prefix: str,  # type: ignore[no-untyped-def]
) -> None:
    # Apptainer under --cleanenv passes only PREFIX_NAME in, as NAME (its env/create.go)
    site = tmp_path / "clean.yaml"
    site.write_text(f"name: clean\nruntime: {{kind: {kind}, flags: [--cleanenv]}}\n")
    request = LaunchRequest(script="t.py", image="x.sif", controller="torch", nodes=3,
                            ntasks_per_node=3, env={"FOO": "a b", "PATH": "/opt/bin"})  # fmt: skip
    argv = plan_launch(load_site(str(site)), request).step
    # a stand-in for the runtime, which cannot run here: it prints the environment it got
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / kind).write_text("#!/bin/sh\nexec env\n")
    (bin_dir / kind).chmod(0o755)
    task = ["sh", *argv[argv.index(_torch.RENDEZVOUS) - 1 :]]  # the part srun runs on a node
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", **TASK, "SLURM_PROCID": "4",
           "SLURM_NODEID": "1", "SLURM_LOCALID": "1", "FOO": "a b", f"{prefix}PATH": "/opt/bin"}  # fmt: skip
    out = subprocess.run(task, capture_output=True, text=True, env=env, check=True).stdout
    got = dict(line.split("=", 1) for line in out.splitlines() if line.startswith(prefix))
    assert got[prefix + "MASTER_ADDR"] == "gpu07" and got[prefix + "RANK"] == "4"
    assert (got[prefix + "LOCAL_RANK"], got[prefix + "LOCAL_WORLD_SIZE"]) == ("1", "3")
    assert got[prefix + "WORLD_SIZE"] == "7" and got[prefix + "FOO"] == "a b"
    assert got[prefix + "PATH"] == "/opt/bin"  # given under the prefix already, once


def test_cleanenv_is_still_refused_where_the_program_reads_sruns_variables(tmp_path) -> None:  # type: ignore[no-untyped-def]
    site = tmp_path / "clean.yaml"
    site.write_text("name: clean\nruntime: {kind: apptainer, flags: [--cleanenv]}\n")
    with pytest.raises(UserError, match=r"so --controller mpi's ranks cannot find each other"):
        plan_launch(load_site(str(site)), LaunchRequest(script="t.py", image="x.sif", ntasks=2))


IMAGES = {"perlmutter": "u/i:t"}


def torchrun_layout(site: str, **fields: object) -> tuple[int, int, list[str]]:
    """(nodes, ranks a node, the allocation's options) of a torchrun launch on `site`."""
    extra = {"account": "m_g"} if site == "perlmutter" else {}
    if site == "neuron":
        extra = {"comment": "field=ai;appl=pytorch-ddp"}
    plan = plan_launch(
        load_site(site),
        LaunchRequest(
            script="t.py", image=IMAGES.get(site, "x.sif"), controller="torchrun", **extra, **fields
        ),  # type: ignore[arg-type]  # fmt: skip
    )
    layout = plan.launch.layout
    return layout.nodes, layout.processes_per_node, plan.allocation


@pytest.mark.parametrize(
    ("site", "n", "nodes", "per_node"),
    [
        ("perlmutter", 6, 2, 3),  # was 2 nodes x 4 GPUs: 8 ranks
        ("perlmutter", 8, 2, 4),
        ("zih-ml", 8, 2, 4),  # was 2 x 6 (--gres=gpu:6): 12 ranks
        ("local", 8, 1, 8),  # CPU nodes: one node, like --controller torch (was 8 nodes)
    ],
)
def test_torchrun_makes_n_ranks_as_torch_would(
    site: str, n: int, nodes: int, per_node: int
) -> None:
    got_nodes, procs, _ = torchrun_layout(site, ntasks=n)
    assert (got_nodes, procs) == (nodes, per_node) and got_nodes * procs == n
    torch_plan = plan_launch(
        load_site(site),
        LaunchRequest(
            script="t.py",
            image=IMAGES.get(site, "x.sif"),
            controller="torch",
            ntasks=n,
            **({"account": "m_g"} if site == "perlmutter" else {}),
        ),
    )
    assert torch_plan.launch.layout.ranks == n
    assert (torch_plan.launch.layout.nodes or 1) == got_nodes  # one layout rule for both


def test_torchrun_refuses_a_world_that_does_not_split_and_names_the_nearest() -> None:
    with pytest.raises(UserError) as info:
        torchrun_layout("local", ntasks=7, nodes=2)
    text = str(info.value)
    assert text.startswith("-n 7: --controller torchrun starts the same number of ranks")
    assert "-N 2 --ntasks-per-node 3 (6 ranks)" in text
    assert "-N 2 --ntasks-per-node 4 (8 ranks)" in text and "--controller torch" in text


def test_torchruns_task_gets_the_cpus_of_all_its_ranks() -> None:
    # Neuron gives each rank 4 CPUs: torchrun's one task holds a node's 8 ranks
    _nodes, procs, allocation = torchrun_layout("neuron", ntasks=8)
    assert procs == 8 and "--cpus-per-task=32" in allocation
    _nodes, procs, allocation = torchrun_layout("local", ntasks=4, nodes=2, cpus_per_task=1)
    assert procs == 2 and "--cpus-per-task=2" in allocation


def test_a_site_default_in_a_refusal_is_named_as_the_sites() -> None:
    with pytest.raises(UserError) as info:
        plan_launch(
            load_site("perlmutter"),
            LaunchRequest(script="t.py", image="u/i:t", ntasks_per_node=8, account="m_g"),
        )
    assert "--cpus-per-task 32 (site perlmutter's default) x 8 ranks" in str(info.value)


def test_torchruns_ranks_are_its_processes_not_its_tasks() -> None:
    """-N 2 alone at Neuron: torchrun starts a node's 8 GPUs' worth of processes in its one
    task a node, 16 ranks, as --controller torch makes 16 tasks: no GPU left idle is said (it
    said '-n 2 ... leaves 14 GPUs idle')."""
    from _launch_helpers import plan_launch
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.loader import load_site

    for controller in ("torch", "torchrun"):
        request = LaunchRequest(
            script="t.py", image="x.sif", nodes=2, controller=controller,
            comment="field=nlp;appl=pytorch",
        )  # fmt: skip
        launch = plan_launch(load_site("neuron"), request)
        assert launch.launch.ranks == 16, controller
        assert not any("idle" in w for w in launch.warnings), launch.warnings
    assert launch.launch.layout.tasks == 2  # torchrun: one task a node
