"""Screening an allocation's nodes (launcher/run/screen.py): the rounds of pairs, each step's
verdict from its output, the judgement over the pairs, and the training request narrowed to the
good nodes. The steps themselves run on the local cluster in tests/e2e/test_screen_nodes.py."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import yaml
from hvd_container.launcher.plan.request import LaunchOptions, LaunchRequest, check
from hvd_container.launcher.run import commands
from hvd_container.launcher.run.screen import (
    NodeVerdict,
    PairResult,
    StepResult,
    judge,
    narrowed,
    node_alone,
    pair_figure,
    ring_rounds,
    screen,
)
from hvd_container.launcher.sites.loader import load_site, record_expected_busbw

from hvd_container.cli.app import main
from hvd_container.core.errors import UserError

LONE = "SMOKE rank 0 size 1 host {node} controller torch\nSMOKE rank 0 op torch-gloo allreduce ok\n"
PAIR = (
    "SMOKE rank 0 size 2 host {a} controller torch\nSMOKE rank 1 size 2 host {b} controller torch\n"
    "SMOKE rank 0 op torch-gloo allreduce ok busbw {bw0} MB/s\n"
    "SMOKE rank 1 op torch-gloo allreduce ok busbw {bw1} MB/s\n"
)


@pytest.mark.parametrize(
    ("count", "rounds"),
    [(1, 0), (2, 1), (3, 3), (4, 2), (5, 3), (8, 2)],
)
def test_each_node_meets_two_partners_in_rounds_without_a_shared_node(
    count: int, rounds: int
) -> None:
    nodes = [f"n{i}" for i in range(count)]
    found = ring_rounds(nodes)
    assert len(found) == rounds
    for r in found:
        used = [n for pair in r for n in pair]
        assert len(used) == len(set(used))  # a round's steps run at once
    pairs = [p for r in found for p in r]
    if count >= 3:
        for node in nodes:
            assert sum(node in p for p in pairs) == 2


def test_a_lone_node_that_started_a_rank_is_ok() -> None:
    verdict = node_alone("node1", StepResult(0, LONE.format(node="node1")), 60)
    assert verdict == NodeVerdict("node1", "ok")


def test_a_lone_step_past_its_timeout_is_a_down_node() -> None:
    verdict = node_alone("node3", StepResult(None, ""), 60)
    assert verdict == NodeVerdict("node3", "down", "no answer within 60 s")


def test_srun_that_cannot_reach_the_slurmd_is_a_down_node() -> None:
    said = "srun: error: Task launch for StepId=12.3 failed on node node3: Communication connection failure\n"
    verdict = node_alone("node3", StepResult(1, said), 60)
    assert verdict.status == "down" and "Communication connection failure" in verdict.why


def test_a_node_that_left_the_allocation_is_a_down_node() -> None:
    said = "srun: error: Unable to create step for job 9: Requested node configuration is not available\n"
    assert node_alone("node5", StepResult(1, said), 60).status == "down"


def test_a_rank_that_never_started_is_a_broken_container_path() -> None:
    said = "srun: error: node2: task 0: Exited with exit code 1\n"
    verdict = node_alone("node2", StepResult(1, said), 60)
    assert verdict.status == "broken"
    assert verdict.why == (
        f"the container did not start a rank: no output from the task | {said.strip()}"
    )


def test_a_verdict_quotes_the_tasks_own_words_before_sruns() -> None:
    said = (
        "ch-run[41]: error: can't mount image: No such file or directory (ch_core.c:350)\n"
        "srun: error: node2: task 0: Exited with exit code 1\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=9.1\n"
    )
    assert node_alone("node2", StepResult(1, said), 60).why == (
        "the container did not start a rank: ch-run[41]: error: can't mount image: No such file "
        "or directory (ch_core.c:350) | srun: error: node2: task 0: Exited with exit code 1"
    )


def test_a_pair_reports_its_slower_rank() -> None:
    text = PAIR.format(a="node1", b="node2", bw0=812.5, bw1=790.1)
    assert pair_figure(("node1", "node2"), StepResult(0, text)) == PairResult(
        ("node1", "node2"), 790.1
    )
    failed = pair_figure(("node1", "node2"), StepResult(1, "boom\n"))
    assert failed.busbw is None and failed.why == "exit 1: boom"


def lone_ok(*nodes: str) -> list[NodeVerdict]:
    return [NodeVerdict(n, "ok") for n in nodes]


def test_a_node_whose_every_pair_is_slow_is_named_slow() -> None:
    pairs = [
        PairResult(("n1", "n2"), 900.0),
        PairResult(("n2", "n3"), 60.0),
        PairResult(("n3", "n1"), 55.0),
    ]
    found = judge(["n1", "n2", "n3"], lone_ok("n1", "n2", "n3"), pairs)
    assert found.good == ["n1", "n2"]
    (bad,) = found.bad
    assert bad.node == "n3" and bad.status == "slow"
    assert bad.why == (
        "best pair 60 MB/s, below 450 MB/s (half of the allocation's median best pair 900 MB/s)"
    )
    assert found.reference == 900.0


def test_the_sites_expected_figure_raises_the_bar() -> None:
    pairs = [
        PairResult(("n1", "n2"), 900.0),
        PairResult(("n2", "n3"), 800.0),
        PairResult(("n3", "n1"), 850.0),
    ]
    assert not judge(["n1", "n2", "n3"], lone_ok("n1", "n2", "n3"), pairs).bad
    found = judge(["n1", "n2", "n3"], lone_ok("n1", "n2", "n3"), pairs, expected=1800.0)
    assert [v.node for v in found.bad] == ["n3"]  # its best, 850, is below 1800/2; n1-n2: 900
    assert "the site's expected 1800 MB/s" in found.bad[0].why


def test_when_every_pair_is_slow_the_network_is_and_no_node_is_blamed() -> None:
    found = judge(
        ["n1", "n2"], lone_ok("n1", "n2"), [PairResult(("n1", "n2"), 40.0)], expected=1000.0
    )
    assert not found.bad
    assert found.notes and "the network as a whole is slow" in found.notes[0]


def test_when_no_pair_passes_no_node_is_blamed() -> None:
    found = judge(["n1", "n2"], lone_ok("n1", "n2"), [PairResult(("n1", "n2"), None, "exit 1")])
    assert not found.bad
    assert found.notes and "no pair's all-reduce passed" in found.notes[0]


def test_doctor_marks_the_slow_pairs() -> None:
    from hvd_container.launcher.run.doctor import Report, add_screen

    report = Report()
    add_screen(report, screened_three())
    marks = {r.check: r.status for r in report.smoke}
    assert marks["pair-n1-n2"] == "pass"
    assert marks["pair-n2-n3"] == marks["pair-n3-n1"] == "warn"
    assert marks["screen-n3"] == "fail" and marks["screen-n1"] == "pass"


def test_lone_failures_stand_and_a_node_whose_pairs_all_failed_is_broken() -> None:
    alone = [
        NodeVerdict("n1", "ok"),
        NodeVerdict("n2", "ok"),
        NodeVerdict("n3", "ok"),
        NodeVerdict("n4", "down", "no answer within 60 s"),
    ]
    pairs = [
        PairResult(("n1", "n2"), 900.0),
        PairResult(("n2", "n3"), None, "exit 1: gloo timeout"),
        PairResult(("n3", "n1"), None, "exit 1: gloo timeout"),
    ]
    found = judge(["n1", "n2", "n3", "n4"], alone, pairs)
    assert {v.node: v.status for v in found.bad} == {"n3": "broken", "n4": "down"}
    assert "its all-reduce with n2, n1 failed" in next(v.why for v in found.bad if v.node == "n3")


def screened_three() -> object:
    pairs = [
        PairResult(("n1", "n2"), 900.0),
        PairResult(("n2", "n3"), 60.0),
        PairResult(("n3", "n1"), 55.0),
    ]
    return judge(["n1", "n2", "n3"], lone_ok("n1", "n2", "n3"), pairs)


def test_too_few_good_nodes_fail_under_the_default_policy() -> None:
    request = LaunchRequest(script="train.py", nodes=3, ntasks=6)
    with pytest.raises(UserError, match=r"1 of 3 nodes failed \(n3 slow: .*\); 3 were asked"):
        narrowed(request, screened_three(), "fail")


def test_shrink_runs_on_the_good_nodes_with_fewer_ranks_and_excludes_the_bad() -> None:
    request = LaunchRequest(script="train.py", nodes=3, ntasks=6, srun_options=["--exact"])
    smaller, said = narrowed(request, screened_three(), "shrink")
    assert (smaller.nodes, smaller.ntasks) == (2, 4)
    assert smaller.srun_options == ["--exact", "--exclude=n3"]
    assert said.startswith("screen: running on 2 of the 3 nodes asked for, without n3")


def test_spare_nodes_take_the_bad_ones_place_under_either_policy() -> None:
    request = LaunchRequest(script="train.py", nodes=2)
    smaller, said = narrowed(request, screened_three(), "fail")
    assert smaller.nodes == 2 and smaller.srun_options == ["--exclude=n3"]
    assert said.startswith("screen: excluding n3")


def test_a_screen_steps_are_the_smoke_program_on_the_named_nodes(tmp_path: Path) -> None:
    """The runner sees one lone step a node, then the ring's pairs: each the launch request
    with the smoke program, one rank a node, and --nodelist."""
    seen: list[LaunchRequest] = []

    def runner(request: LaunchRequest, timeout: float) -> StepResult:
        seen.append(request)
        nodes = request.srun_options[-1].split("=", 1)[1].split(",")
        if len(nodes) == 1:
            return StepResult(0, LONE.format(node=nodes[0]))
        bw = 50.0 if "n3" in nodes else 900.0
        return StepResult(0, PAIR.format(a=nodes[0], b=nodes[1], bw0=bw, bw1=bw))

    from hvd_container.launcher.report import Reporter

    site = load_site("local")
    request = LaunchRequest(
        script="train.py",
        image=str(tmp_path / "x.sif"),
        controller="torch",
        screen=True,
        screen_policy="shrink",
    )
    (tmp_path / "x.sif").write_bytes(b"")
    found = screen(site, request, Reporter(), nodes=["n1", "n2", "n3"], runner=runner)
    assert [v.node for v in found.bad] == ["n3"]
    lone = [r for r in seen if r.nodes == 1]
    assert sorted(r.srun_options[-1] for r in lone) == [
        "--nodelist=n1",
        "--nodelist=n2",
        "--nodelist=n3",
    ]
    assert all(r.ntasks_per_node == 1 and r.script.endswith(".py") for r in seen)
    assert all(r.script != "train.py" and not r.screen for r in seen)
    for step in seen:  # each step is a launch request that passes the checks
        check(site, step)
    assert not Path(seen[0].script).exists()  # the payload is removed afterwards


def test_a_step_that_cannot_be_planned_is_one_error_not_a_thread_traceback(
    tmp_path: Path,
) -> None:
    from hvd_container.launcher.report import Reporter

    def runner(request: LaunchRequest, timeout: float) -> StepResult:
        raise UserError("--image: no such file")

    request = LaunchRequest(script="train.py", image=str(tmp_path / "x.sif"), controller="torch")
    (tmp_path / "x.sif").write_bytes(b"")
    with pytest.raises(UserError, match="--image: no such file"):
        screen(load_site("local"), request, Reporter(), nodes=["n1", "n2"], runner=runner)


def test_the_policy_is_checked_with_the_other_parameters() -> None:
    site = load_site("local")
    with pytest.raises(
        UserError,
        match=r"--screen-policy: 'maybe' is not allowed \(allowed: fail, shrink, requeue\)",
    ):
        check(site, LaunchRequest(script="t.py", screen=True, screen_policy="maybe"))
    with pytest.raises(UserError, match="--screen-policy goes with --screen"):
        check(site, LaunchRequest(script="t.py", screen_policy="shrink"))


def test_a_batch_job_that_screens_runs_this_tools_run_screen_with_the_same_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outside an allocation the job screens itself: its one line is `run --screen` by this
    Python, whose options make the same request again inside the job (no #SBATCH option)."""
    from hvd_container.launcher.report import Reporter

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "image").mkdir()  # an image directory, as ch-run runs it
    options = LaunchOptions(
        site="local", image="image", controller="torch", nodes="4", screen=True,
        screen_policy="shrink", env=["A=b c"], hang_after="10m", time="1:00:00",
        srun_options=["--mem-bind=local"], sbatch_options=["--exclusive"],
    )  # fmt: skip
    launch = commands.batch(Reporter(), "train.py", ["--epochs", "3", "-n", "2"], options=options)
    assert launch.script is not None
    last = launch.script.rstrip("\n").splitlines()[-1]
    assert shlex.split(last) == [
        sys.executable, "-m", "hvd_container", "run", "--site=local", "--image=image",
        "--nodes=4", "--controller=torch", "--env=A=b c", "--time=1:00:00",
        "--hang-after=600s", "--screen", "--screen-policy=shrink",
        "--srun-option=--mem-bind=local", "--", "train.py", "--epochs", "3", "-n", "2",
    ]  # fmt: skip
    for line in ("#SBATCH --exclusive", "#SBATCH --nodes=4", "#SBATCH --no-kill"):
        assert line in launch.script.splitlines(), launch.script
    assert "export " not in launch.script  # the job's own run sets its steps' variables
    # read back as the job reads it: the command line takes it, inside the allocation
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    words = shlex.split(last)
    assert main([*words[3 : words.index("--")], "--dry-run", *words[words.index("--") :]]) == 0
    out, err = capsys.readouterr()
    step = next(line for line in out.splitlines() if line.startswith(("srun", "env ")))
    assert "-N 4" in step and "--mem-bind=local" in step and "'A=b c'" in step, out
    assert "--screen: the nodes are screened first" in err


def test_record_writes_the_figure_with_its_source_into_the_users_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    site = load_site("local")
    path = record_expected_busbw(site, 812.345, "doctor --screen in job 7 on 3 nodes")
    assert path == tmp_path / "hvd-container" / "sites" / "local.yaml"
    assert path.stat().st_mode & 0o077 == 0
    data = yaml.safe_load(path.read_text())
    assert data["extends"] == "local" and data["expected_busbw"] == 812.3
    assert data["sources"][-1]["keys"] == ["expected_busbw"]
    assert len(data["sources"]) == len(site.sources) + 1  # the profile's own kept
    again = load_site("local")
    assert again.expected_busbw == 812.3
    record_expected_busbw(again, 700.0, "a second screen")
    data = yaml.safe_load(path.read_text())
    assert data["expected_busbw"] == 700.0
    assert [s["about"] for s in data["sources"] if s["keys"] == ["expected_busbw"]] == [
        "a second screen"
    ]


def test_screen_outside_an_allocation_gives_the_salloc_line_of_the_launchs_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It said `salloc -N 8` whatever -N was, and without --no-kill (the allocation then
    ends with the first node that fails, which is what a screen looks for)."""
    from hvd_container.launcher.run.screen import allocation_nodes

    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UserError) as info:
        allocation_nodes(3)
    assert str(info.value).startswith(
        "--screen runs inside an allocation: salloc -N 3 --no-kill, then hvd-container run "
        "--screen ... (or doctor --screen) in it"
    )
    with pytest.raises(UserError, match="salloc -N NODES --no-kill"):
        allocation_nodes()
