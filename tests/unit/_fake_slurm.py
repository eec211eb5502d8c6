"""A stand-in for Slurm behind launcher/slurm.py's seam: no Slurm runs in the unit tests.

It holds job records (given; submit makes ids), answers for them as Slurm would, and records what it
was asked; a test that needs a Slurm that misbehaves gives the callable it should run instead
(`on_submit`, `on_job`). `fake_slurm` (tests/unit/conftest.py) puts one in place for a test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hvd_container.launcher.slurm import Job


@dataclass
class FakeSlurm:
    records: dict[str, Job] = field(default_factory=dict)  # by job id
    down: list[str] = field(default_factory=list)  # the nodes it counts as down
    on_submit: Callable[[str, list[str]], str] | None = None  # else job ids 1000, 1001, ...
    on_job: Callable[[str], Job | None] | None = None  # else the jobs it holds
    submitted: list[tuple[str, list[str]]] = field(default_factory=list)  # (script, argv)
    asked: list[str] = field(default_factory=list)  # the job ids whose records were asked for
    cancelled: list[str] = field(default_factory=list)
    down_asked: list[str] = field(default_factory=list)
    next_id: int = 1000

    def which(self, command: str = "sbatch") -> str:
        return f"/usr/bin/{command}"

    def submit(self, script: str, argv: list[str], *, private: bool = False) -> str:
        self.submitted.append((script, list(argv)))
        if self.on_submit is not None:
            return self.on_submit(script, argv)
        self.next_id += 1
        return str(self.next_id - 1)

    def job(self, job_id: str) -> Job | None:
        self.asked.append(job_id)
        if self.on_job is not None:
            return self.on_job(job_id)
        return self.records.get(job_id)

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)

    def jobs(self, user: str | None, *, finished: bool) -> list[Job]:
        mine = [j for j in self.records.values() if user is None or j.user == user]
        return [j for j in mine if finished or not j.finished]

    def down_nodes(self, nodes: str) -> list[str]:
        self.down_asked.append(nodes)
        return [n for n in self.down if n in self.hostnames(nodes)]

    def hostnames(self, nodelist: str) -> list[str]:
        return expand(nodelist.split(","))


def expand(items: Iterable[str]) -> list[str]:
    """node[1-3] -> node1 node2 node3, the plain hostlists the tests write."""
    names = []
    for item in items:
        head, bracket, rest = item.partition("[")
        if not bracket:
            names.append(item)
            continue
        low, _, high = rest.rstrip("]").partition("-")
        names += [f"{head}{i}" for i in range(int(low), int(high or low) + 1)]
    return names
