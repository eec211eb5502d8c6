"""`hvd-container doctor`: will this image start and communicate on this site?

The static part needs no job: the launch is planned as the smoke job would be, and every check
of the registry (launcher/checks/registry.py) reports pass, warn, fail or skip, the same checks a
launch stops at; on the site's login node this machine is asked too (srun's MPI plugins,
nvidia-smi's driver).

The smoke part (`smoke`) runs a short job on the allocated nodes, in the container, once per
controller the image has: each rank reports rank and size, then an allreduce checks its sum and
measures the bus bandwidth (and NCCL's where there are GPUs).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from hvd_container.launcher import controllers, slurm
from hvd_container.launcher.checks.registry import Result
from hvd_container.launcher.checks.verdict import Status
from hvd_container.launcher.plan.planner import plan
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.run.execute import submitted_job
from hvd_container.launcher.runtimes import tool_folder
from hvd_container.launcher.sites.loader import choose_site
from hvd_container.launcher.sites.machine import ThisMachine
from hvd_container.launcher.sites.model import Site

from hvd_container import known_bad
from hvd_container.core.errors import UserError

if TYPE_CHECKING:
    from hvd_container.launcher.run.screen import Screen
from hvd_container.core.files import write_new_private


@dataclass
class Report:
    """The registry's checks, then what the smoke job found."""

    checks: list[Result] = field(default_factory=list)
    smoke: list[Result] = field(default_factory=list)
    screen: Screen | None = None  # what --screen found, when it ran

    def add(self, check: str, status: Status, message: str) -> None:
        self.smoke.append(Result(check, status, message))

    @property
    def failed(self) -> bool:
        return any(r.status == "fail" for r in (*self.checks, *self.smoke))


def diagnose(site: Site, request: LaunchRequest, *, ask_machine: bool = True) -> Report:
    """Every check of the registry for the launch `request` on `site`. `ask_machine`: also ask
    this machine (srun --mpi=list, nvidia-smi) when it is the site's; off in tests that must
    not depend on it."""
    machine = ThisMachine(choose_site(None)[0]) if ask_machine else None
    launch = plan(site, request, "smoke", dry_run=True, keep_going=True, machine=machine)
    return Report(checks=launch.results)


# ---------------------------------------------------------------------------------- smoke

_RANK = re.compile(r"^SMOKE rank (\d+) size (\d+) host (\S+) controller (\S+)$", re.M)
_OP = re.compile(
    r"^SMOKE rank (\d+) op (\S+) allreduce (ok|WRONG sum \S+)(?: busbw ([0-9]+(?:\.[0-9]+)?) MB/s)?$",
    re.M,
)
_AVERAGE = re.compile(r"^SMOKE rank (\d+) op (\S+) average (ok|WRONG .+)$", re.M)


@dataclass(frozen=True)
class SmokeRank:
    rank: int
    size: int
    host: str
    controller: str


@dataclass(frozen=True)
class SmokeOp:
    """One rank's allreduce of one operation: "ok" or the wrong sum, its bus bandwidth (None at
    one rank, where the allreduce is a copy), and its odd-length Average ("ok", the wrong
    values, or None where the payload ran none)."""

    rank: int
    word: str
    busbw: float | None
    average: str | None = None


def parse_smoke(text: str) -> tuple[list[SmokeRank], dict[str, list[SmokeOp]]]:
    """(each rank's line, per operation: each rank's SmokeOp)."""
    ranks = [SmokeRank(int(r), int(s), h, c) for r, s, h, c in _RANK.findall(text)]
    averages = {(int(r), op): word for r, op, word in _AVERAGE.findall(text)}
    ops: dict[str, list[SmokeOp]] = {}
    for rank, op, word, busbw in _OP.findall(text):
        row = SmokeOp(
            int(rank), word, float(busbw) if busbw else None, averages.get((int(rank), op))
        )
        ops.setdefault(op, []).append(row)
    return ranks, ops


def judge_smoke(controller: str, expected: int, exit_code: int, text: str, report: Report) -> None:
    """Report lines of one smoke launch: size, controller and allreduce per rank, per node."""
    name = f"smoke-{controller}"
    ranks, ops = parse_smoke(text)
    if not ranks:
        tail = " | ".join(text.strip().splitlines()[-3:]) or "no output"
        report.add(name, "fail", f"no rank started (exit {exit_code}): {tail}")
        return
    sizes = sorted({r.size for r in ranks})
    hosts = sorted({r.host for r in ranks})
    if sizes != [expected] or len(ranks) != expected:
        report.add(
            name,
            "fail",
            f"{len(ranks)} ranks reported sizes {', '.join(map(str, sizes))}, expected {expected} "
            f"ranks of size {expected}: the ranks did not find each other (an --mpi plugin the "
            f"image's MPI does not speak starts each as 'rank 0 of 1'); pass --mpi with one it "
            "speaks, or --controller gloo",
        )
        return
    wrong_ctl = sorted({r.controller for r in ranks if r.controller != controller})
    if wrong_ctl:
        report.add(name, "fail", f"ranks ran over {', '.join(wrong_ctl)}, not {controller}")
        return
    report.add(
        name, "pass", f"{expected} ranks, size {expected}, over {controller}, on {', '.join(hosts)}"
    )
    by_rank_host = {r.rank: r.host for r in ranks}
    for op, rows in sorted(ops.items()):
        judge_allreduce(op, rows, expected, by_rank_host, report)
        judge_average(op, rows, report)


def judge_allreduce(
    op: str, rows: list[SmokeOp], expected: int, hosts: dict[int, str], report: Report
) -> None:
    bad = [f"rank {r.rank}: {r.word}" for r in rows if r.word != "ok"]
    if bad or len(rows) != expected:
        why = "; ".join(bad) or f"{expected - len(rows)} ranks did not finish"
        report.add(f"allreduce-{op}", "fail", f"allreduce over {op}: {why}")
        return
    per_host: dict[str, list[float]] = {}
    for r in rows:
        if r.busbw is not None:
            per_host.setdefault(hosts.get(r.rank, "?"), []).append(r.busbw)
    if not per_host:
        report.add(
            f"allreduce-{op}",
            "pass",
            "sum correct; one rank: no bus bandwidth (a copy, not a network)",
        )
        return
    shown = ", ".join(f"{h} {min(v):.0f} MB/s" for h, v in sorted(per_host.items()))
    report.add(f"allreduce-{op}", "pass", f"sum correct on every rank; bus bandwidth {shown}")


def judge_average(op: str, rows: list[SmokeOp], report: Report) -> None:
    """The odd-length Average: wrong values are a known-bad NCCL (the table in known_bad.py)."""
    averages = [r for r in rows if r.average is not None]
    if not averages:
        return
    bad = [f"rank {r.rank}: {r.average}" for r in averages if r.average != "ok"]
    if bad:
        report.add(
            f"average-{op}",
            "fail",
            f"Average over {op} of 4913 values: {'; '.join(bad)}: a known NCCL bug "
            f"({known_bad.NCCL_AVG.effect}, {known_bad.NCCL_AVG.source}): {known_bad.NCCL_AVG.fix}",
        )
        return
    report.add(f"average-{op}", "pass", "an odd-length Average is correct on every rank")


class _Captured(Reporter):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []

    def job_output(self, text: str, *, stderr: bool) -> None:
        self.text.append(text)


def smoke(site: Site, request: LaunchRequest, report: Report, *, poll: float = 0.5) -> None:
    """Run the smoke job once per controller the image has, as a batch job on the nodes the
    request names, and add its lines to `report`."""
    facts = plan(site, request, "smoke", dry_run=True, keep_going=True).launch.facts
    folder = tool_folder("the smoke program")
    for controller in controllers.smoke_controllers(facts):
        script = folder / f"doctor-smoke-{controller.name}-{os.getpid()}.py"
        script.unlink(missing_ok=True)  # a leftover of a killed run with this pid: ours
        write_new_private(script, controller.smoke or "")
        one = replace(request, script=str(script), args=[], controller=controller.name)
        one = replace(one, job_name=one.job_name or f"hvd-doctor-{controller.name}")
        captured = _Captured()
        try:
            launch = plan(site, one, "smoke", machine=ThisMachine())
            with submitted_job(launch, captured, ask=False) as job_id:
                job = slurm.follow(job_id, captured, poll=poll)
        except UserError as exc:
            report.add(f"smoke-{controller.name}", "fail", str(exc))
            continue
        finally:
            script.unlink(missing_ok=True)
        judge_smoke(
            controller.name, launch.launch.ranks, job.exit_code, "".join(captured.text), report
        )


def add_screen(report: Report, found: Screen) -> None:
    """The screen's verdicts as report lines: each node, each pair, the notes."""
    for v in found.verdicts:
        report.add(f"screen-{v.node}", "pass" if v.status == "ok" else "fail",
                   v.status if not v.why else f"{v.status}: {v.why}")  # fmt: skip
    for p in found.pairs:
        slow = p.busbw is None or (found.threshold is not None and p.busbw < found.threshold)
        report.add(f"pair-{p.nodes[0]}-{p.nodes[1]}", "warn" if slow else "pass", p.figure)
    for note in found.notes:
        report.add("screen-network", "warn", note)
