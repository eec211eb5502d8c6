"""Screening the nodes of an allocation before a run (`doctor --screen`, `run --screen`).

Short steps in the allocation, each the image's smoke program (doctor --smoke's, so the same
container path, controller and all-reduce as the training): first every node alone, at once
(does the container start there, does a rank come up), then the nodes that passed in pairs
around a ring (each node with two partners where there are three nodes or more), whose
all-reduce bus bandwidth shows a slow link. A pair is slow below half the reference: the median
over the nodes of each node's best pair, and the site's expected figure where the profile
records one. A node is slow when all its pairs are slow while some other node has a fast one;
when every pair is slow, the network as a whole is, and no node is blamed. The verdicts name
each bad node and why; the run then excludes them (`srun --exclude`), or refuses when fewer
nodes remain than asked (policy `fail`), or runs smaller with a warning (`shrink`).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

from hvd_container.launcher import controllers, slurm
from hvd_container.launcher.plan.planner import plan
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.run.doctor import parse_smoke
from hvd_container.launcher.runtimes import tool_folder
from hvd_container.launcher.sites.machine import ThisMachine
from hvd_container.launcher.sites.model import Site

from hvd_container.core.errors import UserError
from hvd_container.core.files import write_new_private

Status = Literal["ok", "slow", "broken", "down"]
SLOW_FRACTION = 0.5  # a pair below this share of the reference is slow
STEP_TIMEOUT = 180.0  # seconds a screening step may take before its node counts as down
# what srun says when it cannot reach a node's slurmd: the node, not the container, failed
_UNREACHABLE = (
    "Communication connection failure",
    "Unable to contact slurm controller",
    "Zero Bytes were transmitted",
    "Task launch for StepId",
    "Connection refused",
    "Node failure",
    "NODE_FAIL",
    # the node left the allocation (Slurm counted it down; the job kept going with --no-kill)
    "Requested node configuration is not available",
    "Required node not available",
)


@dataclass(frozen=True)
class StepResult:
    """One screening step: its exit code (None: it ran past the timeout) and its output."""

    exit_code: int | None
    output: str


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    status: Status
    why: str = ""


@dataclass(frozen=True)
class PairResult:
    nodes: tuple[str, str]
    busbw: float | None  # MB/s, the slower rank's; None: the pair's step failed
    why: str = ""

    @property
    def figure(self) -> str:
        return f"{self.busbw:.0f} MB/s" if self.busbw is not None else f"failed: {self.why}"


@dataclass
class Screen:
    """What a screen found: a verdict per node, the pairs' figures, the reference they were
    judged by, and notes (the network slow as a whole, two nodes that cannot be told apart)."""

    nodes: list[str]
    verdicts: list[NodeVerdict] = field(default_factory=list)
    pairs: list[PairResult] = field(default_factory=list)
    reference: float | None = None  # MB/s
    expected: float | None = None  # MB/s, the site's
    threshold: float | None = None  # MB/s: a pair below it is slow
    notes: list[str] = field(default_factory=list)

    @property
    def good(self) -> list[str]:
        return [v.node for v in self.verdicts if v.status == "ok"]

    @property
    def bad(self) -> list[NodeVerdict]:
        return [v for v in self.verdicts if v.status != "ok"]

    def to_record(self) -> dict[str, object]:
        """The screen as JSON-ready data (doctor --json's `screen`)."""
        return {
            "nodes": self.nodes,
            "good": self.good,
            "exclude": [v.node for v in self.bad],
            "verdicts": [asdict(v) for v in self.verdicts],
            "pairs": [asdict(p) for p in self.pairs],
            "reference_busbw_mbs": self.reference,
            "expected_busbw_mbs": self.expected,
            "threshold_busbw_mbs": self.threshold,
            "notes": self.notes,
        }

    def lines(self) -> list[str]:
        """What a person reads: each node's verdict, the pairs, the notes."""
        out = [f"{v.node}: {v.status}" + (f": {v.why}" if v.why else "") for v in self.verdicts]
        out += [f"pair {p.nodes[0]}-{p.nodes[1]}: {p.figure}" for p in self.pairs]
        if self.reference is not None:
            out.append(f"reference bus bandwidth: {self.reference:.0f} MB/s")
        return out + self.notes


# ------------------------------------------------------------------------ pure decisions


def ring_rounds(nodes: list[str]) -> list[list[tuple[str, str]]]:
    """The pairs around a ring (each node with its two neighbours; two nodes: one pair), in
    rounds whose pairs share no node, so that a round's steps run at once."""
    n = len(nodes)
    if n < 2:
        return []
    if n == 2:
        return [[(nodes[0], nodes[1])]]
    pairs = [(nodes[i], nodes[(i + 1) % n]) for i in range(n)]
    rounds: list[list[tuple[str, str]]] = []
    for pair in pairs:
        for r in rounds:
            if not any(set(pair) & set(other) for other in r):
                r.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds


def _tail(output: str) -> str:
    """What a verdict quotes, on one line: the task's own last two lines (or that it said
    nothing), then srun's last error (`task 0: Exited with exit code 1`), not srun's other
    lines (`Terminating StepId=...`), which say nothing of why."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    own = [line for line in lines if not line.startswith("srun: ")]
    errors = [line for line in lines if line.startswith("srun: error:")]
    quoted = own[-2:] or ["no output from the task"]
    return " | ".join(quoted + errors[-1:])


def node_alone(node: str, result: StepResult, timeout: float) -> NodeVerdict:
    """A node's verdict from its lone step: a rank came up there, or why not."""
    if result.exit_code is None:
        return NodeVerdict(node, "down", f"no answer within {timeout:.0f} s")
    ranks, ops = parse_smoke(result.output)
    if (
        result.exit_code == 0
        and ranks
        and all(r.word == "ok" for rows in ops.values() for r in rows)
    ):
        return NodeVerdict(node, "ok")
    tail = _tail(result.output)
    if not ranks and any(mark in result.output for mark in _UNREACHABLE):
        return NodeVerdict(node, "down", f"its slurmd did not take the step: {tail}")
    if not ranks:
        return NodeVerdict(node, "broken", f"the container did not start a rank: {tail}")
    return NodeVerdict(node, "broken", f"the rank's all-reduce failed: {tail}")


def pair_figure(pair: tuple[str, str], result: StepResult) -> PairResult:
    """A pair's bus bandwidth (the slower rank's), or why there is none."""
    if result.exit_code is None:
        return PairResult(pair, None, "no answer within the timeout")
    _, ops = parse_smoke(result.output)
    figures = [r.busbw for rows in ops.values() for r in rows if r.busbw is not None]
    if result.exit_code != 0 or len(figures) < 2:
        return PairResult(pair, None, f"exit {result.exit_code}: {_tail(result.output)}")
    return PairResult(pair, min(figures))


def judge(
    nodes: list[str],
    alone: list[NodeVerdict],
    pairs: list[PairResult],
    expected: float | None = None,
) -> Screen:
    """The screen's verdicts from the lone steps and the pairs."""
    screen = Screen(nodes=list(nodes), pairs=list(pairs), expected=expected)
    verdict = {v.node: v for v in alone}
    best: dict[str, float] = {}
    failed: dict[str, list[str]] = {}
    for p in pairs:
        for node in p.nodes:
            if p.busbw is None:
                failed.setdefault(node, []).append(p.nodes[1] if node == p.nodes[0] else p.nodes[0])
            else:
                best[node] = max(best.get(node, 0.0), p.busbw)
    if best:
        screen.reference = statistics.median(best.values())
    limits = [f * SLOW_FRACTION for f in (screen.reference, expected) if f]
    threshold = screen.threshold = max(limits) if limits else None
    fast = {n for n, b in best.items() if threshold is None or b >= threshold}
    tested = [n for n in nodes if verdict.get(n, NodeVerdict(n, "ok")).status == "ok"]
    for node in nodes:
        if node in verdict and verdict[node].status != "ok":
            screen.verdicts.append(verdict[node])
        elif node not in best and node in failed and any(n in fast for n in tested if n != node):
            partners = ", ".join(failed[node])
            screen.verdicts.append(
                NodeVerdict(node, "broken", f"its all-reduce with {partners} failed")
            )
        elif node in best and node not in fast and fast:
            screen.verdicts.append(
                NodeVerdict(
                    node,
                    "slow",
                    f"best pair {best[node]:.0f} MB/s, below {threshold:.0f} MB/s "
                    f"(half of {_reference_words(screen.reference, expected)})",
                )
            )
        else:
            screen.verdicts.append(NodeVerdict(node, "ok"))
    if failed and not fast:
        screen.notes.append(
            f"no pair's all-reduce passed ({len(failed)} nodes in failed pairs): the network "
            "between the nodes, not one node; no node is blamed"
        )
    if best and not fast:
        screen.notes.append(
            f"every pair is below {threshold:.0f} MB/s (half of "
            f"{_reference_words(screen.reference, expected)}): the network as a whole is slow, "
            "no node is blamed"
        )
    return screen


def _reference_words(reference: float | None, expected: float | None) -> str:
    parts = []
    if reference is not None:
        parts.append(f"the allocation's median best pair {reference:.0f} MB/s")
    if expected is not None:
        parts.append(f"the site's expected {expected:.0f} MB/s")
    return " and ".join(parts)


def narrowed(request: LaunchRequest, screen: Screen, policy: str) -> tuple[LaunchRequest, str]:
    """The training request on the screen's good nodes (srun --exclude the bad ones, fewer
    nodes and ranks), and the line that says so; UserError under policy `fail`, or when no
    node is left. `policy` is one request.check allows (checked there, once)."""
    bad = screen.bad
    if not bad:
        return request, f"screen: all {len(screen.nodes)} nodes passed"
    named = "; ".join(f"{v.node} {v.status}: {v.why}" for v in bad)
    if not screen.good:
        raise UserError(f"screen: no node passed ({named})")
    asked = request.nodes or len(screen.nodes)
    exclude = ",".join(v.node for v in bad)
    options = [*request.srun_options, f"--exclude={exclude}"]
    if len(screen.good) >= asked:
        return replace(request, srun_options=options), (
            f"screen: excluding {exclude} ({named}); {len(screen.good)} good nodes remain"
        )
    if policy == "fail":
        raise UserError(
            f"screen: {len(bad)} of {len(screen.nodes)} nodes failed ({named}); {asked} were "
            "asked for: pass --screen-policy shrink to run on the others, or ask for fewer"
        )
    nodes = len(screen.good)
    ntasks = request.ntasks
    if ntasks is not None:
        ntasks = max(nodes, ntasks * nodes // asked)
    smaller = replace(request, nodes=nodes, ntasks=ntasks, srun_options=options)
    return smaller, (
        f"screen: running on {nodes} of the {asked} nodes asked for, without {exclude} "
        f"({named}): fewer ranks, so a smaller global batch"
    )


def screened(site: Site, request: LaunchRequest, reporter: Reporter) -> LaunchRequest:
    """`run --screen`: screen the allocation, say what was found, and return the request
    narrowed to the good nodes (UserError under policy fail when too few remain)."""
    found = screen(site, request, reporter)
    for line in found.lines():
        reporter.status(line)
    smaller, said = narrowed(request, found, request.screen_policy)
    if found.bad or found.notes:
        reporter.warn([said, *found.notes])
    else:
        reporter.status(said)
    return smaller


# ------------------------------------------------------------------------ running the steps


def allocation_nodes(asked: int | None = None) -> list[str]:
    """The nodes of the allocation this runs in (scontrol expands SLURM_JOB_NODELIST); `asked`:
    the -N of the launch, for the salloc line that makes one."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not os.environ.get("SLURM_JOB_ID") or not nodelist:
        # --no-kill: the allocation outlives a node that fails, which is what a screen is for
        raise UserError(
            f"--screen runs inside an allocation: salloc -N {asked or 'NODES'} --no-kill, then "
            "hvd-container run --screen ... (or doctor --screen) in it, or from a batch script"
        )
    names = slurm.hostnames(nodelist)
    if not names:
        raise UserError(f"scontrol show hostnames {nodelist}: no nodes (is Slurm answering here?)")
    return names


Runner = Callable[[LaunchRequest, float], StepResult]


def run_step(site: Site) -> Runner:
    """A runner of screening steps on `site`: the plan's srun line, output captured, ended at
    the timeout (srun takes SIGTERM as the end of its step)."""

    def run(request: LaunchRequest, timeout: float) -> StepResult:
        launch = plan(site, request, "run", machine=ThisMachine())
        proc = subprocess.Popen(
            launch.argv,
            env={**os.environ, **launch.env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
            return StepResult(proc.returncode, out)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                out, _ = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            return StepResult(None, out)

    return run


def _at_once(jobs: list[Callable[[], None]]) -> None:
    """Run the jobs in threads at once; the first one's error is raised here, after all end."""
    errors: list[BaseException] = []

    def guarded(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # raised in the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def screen(
    site: Site,
    request: LaunchRequest,
    reporter: Reporter,
    *,
    nodes: list[str] | None = None,
    runner: Runner | None = None,
    timeout: float = STEP_TIMEOUT,
) -> Screen:
    """Screen the allocation's nodes for `request`'s image (see the module's text)."""
    nodes = nodes or allocation_nodes(request.nodes)
    runner = runner or run_step(site)
    launch = plan(site, request, "smoke", dry_run=True, keep_going=True).launch
    found = {c.name: c for c in controllers.smoke_controllers(launch.facts)}
    if not found:
        raise UserError(
            "--screen: the image has no controller with a smoke program (torch, Horovod)"
        )
    # the launch's own controller (--controller, or the one the script is written for)
    controller = found.get(launch.controller.name) or next(iter(found.values()))
    payload = tool_folder("the screen program") / f"screen-{controller.name}-{os.getpid()}.py"
    payload.unlink(missing_ok=True)  # a leftover of a killed run with this pid: ours
    write_new_private(payload, controller.smoke or "")
    base = replace(
        request,
        script=str(payload),
        args=[],
        controller=controller.name,
        ntasks_per_node=1,
        hang_after=None,
        cancel_on_hang=False,
        stage=False,
        screen=False,
        screen_policy="fail",
        inside_allocation=True,
    )
    try:
        reporter.status(f"screen: {len(nodes)} nodes alone, over {controller.name}")
        alone: dict[str, NodeVerdict] = {}

        def lone(node: str) -> Callable[[], None]:
            def go() -> None:
                one = replace(
                    base, nodes=1, ntasks=1,
                    srun_options=[*base.srun_options, f"--nodelist={node}"],
                )  # fmt: skip
                alone[node] = node_alone(node, runner(one, timeout), timeout)

            return go

        _at_once([lone(n) for n in nodes])
        passed = [n for n in nodes if alone[n].status == "ok"]
        pairs: dict[tuple[str, str], PairResult] = {}

        def paired(pair: tuple[str, str]) -> Callable[[], None]:
            def go() -> None:
                two = replace(
                    base, nodes=2, ntasks=2,
                    srun_options=[*base.srun_options, f"--nodelist={pair[0]},{pair[1]}"],
                )  # fmt: skip
                pairs[pair] = pair_figure(pair, runner(two, timeout))

            return go

        rounds = ring_rounds(passed)
        if rounds:
            reporter.status(f"screen: {sum(map(len, rounds))} pairs in {len(rounds)} rounds")
        for r in rounds:
            _at_once([paired(p) for p in r])
    finally:
        payload.unlink(missing_ok=True)
    ordered = [pairs[p] for r in rounds for p in r]
    return judge(nodes, [alone[n] for n in nodes], ordered, site.expected_busbw)
