"""`hvd-container doctor`: will this image start and communicate on this site?

The static part needs no job: the image's facts (its labels, or a SIF's own descriptor) and the
site profile go through the same named checks a launch runs (launcher.pitfalls, via
plan_launch), plus what only this machine can tell (srun's MPI plugins, nvidia-smi's driver).
A launch stops at the first failing check; doctor reports every one as pass / warn / fail.

The smoke part (`smoke`) runs a short job on the allocated nodes, in the container: each rank
reports rank and size from the controller, then a Horovod allreduce checks its sum and measures
the bus bandwidth, once per controller the image has (and NCCL where there are GPUs).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from hvd_container.launcher import pitfalls, preflight
from hvd_container.launcher.compose import plan_launch, resolve_image
from hvd_container.launcher.facts import ImageFacts
from hvd_container.launcher.prepare import prepare_launch, working_directory
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.request import LaunchRequest
from hvd_container.launcher.sites import Site

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import UserError

Status = Literal["pass", "warn", "fail"]

# What each check of plan_launch looks at: the text of its pass line.
CHECKED = {
    "comment": "the site's --comment rule",
    "account": "the site's account suffix rule",
    "arch": "the image's architecture is the nodes'",
    "mpi-plugin": "srun's --mpi plugin is one the image's MPI speaks",
    "controller": "Horovod has the controller the launch uses",
    "cleanenv": "the runtime passes the job's environment",
    "modules": "the runtime's modules",
    "mpi-abi": "the MPI a runtime injects (shifter, podman-hpc) can replace the image's",
    "glibc": "the image's glibc loads the libraries the runtime injects",
    "runtime-gpu": "the runtime gives the container the GPUs asked for",
    "gpu-request": "GPUs asked for where the image uses them",
    "gpu-operations": "Horovod reduces GPU tensors with NCCL (GPU launches)",
    "cuda-driver": "the image's CUDA against the nodes' driver (GPU launches, driver known)",
    "image-ignored": "the runtime runs the image named",
    "registry": "an image named from a recipe has a registry (registry runtimes)",
    "registry-per-rank": "a registry image is converted once, not once per rank",
    "image-location": "the image is where the compute nodes see it",
    "nccl-interface": "NCCL's network interface is named (multi-node GPU launches)",
    "nccl-network": "NCCL's network is forced so a missing plugin fails at start (multi-node GPU)",
}


# the checks that say nothing without the image's facts
NEED_FACTS = {
    "arch", "mpi-plugin", "controller", "mpi-abi", "glibc", "gpu-request", "gpu-operations",
    "cuda-driver",
}  # fmt: skip


@dataclass(frozen=True)
class Result:
    """One line of the report."""

    check: str
    status: Status
    message: str


@dataclass
class Report:
    results: list[Result] = field(default_factory=list)

    def add(self, check: str, status: Status, message: str) -> None:
        self.results.append(Result(check, status, message))

    @property
    def failed(self) -> bool:
        return any(r.status == "fail" for r in self.results)


def nvidia_driver() -> str | None:
    """The driver of this node's GPUs (nvidia-smi), or None where there is none."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = proc.stdout.strip().splitlines()[0].strip() if proc.stdout.strip() else ""
    return first if proc.returncode == 0 and re.fullmatch(r"[0-9]+(\.[0-9]+)*", first) else None


def _facts_line(facts: ImageFacts | None) -> tuple[Status, str]:
    if facts is None:
        return "warn", (
            "the image carries no build facts (labels): the checks that need them pass "
            "unjudged; build it with hvd-container, or run `hvd-container verify` on it"
        )
    known = {
        "arch": facts.arch,
        "mpi": facts.mpi_family,
        "pmi": ",".join(facts.mpi_pmi) if facts.mpi_pmi is not None else None,
        "controllers": ",".join(facts.controllers) if facts.controllers is not None else None,
        "cuda": facts.cuda,
        "glibc": facts.glibc,
    }
    shown = ", ".join(f"{k} {v or 'none'}" for k, v in known.items() if v is not None)
    return "pass", f"{facts.source}: {shown}"


def _with_recipe_mpi(facts: ImageFacts | None) -> ImageFacts | None:
    """An image built before its labels named the MPI family: a built-in recipe of its name
    still knows it (a launch skips this: loading the recipe model costs a dry run's budget)."""
    if facts is None or facts.mpi_family is not None or not facts.name:
        return facts
    from hvd_container.containers.recipe import list_builtin

    if facts.name not in list_builtin():
        return facts
    from hvd_container.launcher.facts import facts_from_recipe

    from hvd_container import recipes

    try:
        known = facts_from_recipe(str(recipes.path() / f"{facts.name}.yaml"))
    except UserError:
        return facts
    return replace(facts, mpi_family=known.mpi_family)


def _image_with_facts(
    site: Site, request: LaunchRequest
) -> tuple[str | None, str | None, LaunchRequest]:
    """(the image the launch runs, why it cannot be run or None, the request with the image's
    facts), a Docker image's labels included (a dry run does not wait for the engine; doctor
    does)."""
    kind = site.runtime_for(request.runtime).kind
    image = resolve_image(site, request, kind) if kind != "none" else None
    missing = preflight.missing_image(image, kind)
    if image and not missing:
        request = preflight.with_image_facts(request, image, ask_docker=True)
    return image, missing, request


def diagnose(site: Site, request: LaunchRequest, *, probe: bool = True) -> Report:
    """Every static check of the launch `request` on `site`. `probe`: also ask this machine
    (srun --mpi=list, nvidia-smi); off in tests that must not depend on it."""
    report = Report()
    kind = site.runtime_for(request.runtime).kind
    image, missing, request = _image_with_facts(site, request)
    if missing:
        report.add("image", "fail", missing)
    elif image:
        report.add("image", "pass", f"{image} (runtime {kind})")
    try:
        prepared = prepare_launch(site, request, "show")
    except UserError as exc:  # an image that is not one (a file that is no SIF, say)
        report.add("image", "fail", str(exc))
        return report
    request = replace(prepared.request, facts=_with_recipe_mpi(prepared.request.facts))
    status, text = _facts_line(request.facts)
    report.add("facts", status, text)
    for message in prepared.warnings:
        if not (missing and message.startswith(missing)):
            report.add("prepare", "warn", message)
    checks = pitfalls.Checks([], keep_going=True)
    try:
        plan = plan_launch(prepared.site, request, checks)
    except UserError as exc:  # the request itself (counts, layout) is wrong
        report.add("request", "fail", str(exc))
        return report
    unjudged = " (not judged: the image's facts are unknown)" if request.facts is None else ""
    for name, findings in checks.results:
        if not findings:
            note = unjudged if name in NEED_FACTS else ""
            report.add(name, "pass", CHECKED.get(name, name) + note)
        for finding in findings:
            report.add(name, "fail" if finding.level == "error" else "warn", finding.message)
    reported = {r.message for r in report.results}
    for message in plan.warnings:  # from the layout and the plugin choice
        if message not in reported:
            report.add("layout", "warn", message)
    if probe:
        from hvd_container.launcher.sites import choose_site

        here, _why = choose_site(None, [])
        if here == site.name:
            _machine_checks(report, site, request, plan.argv, plan.layout.gpus_per_node)
        else:
            report.add(
                "this-machine",
                "warn",
                f"this machine is site {here}, not {site.name}: srun's plugins and the GPU "
                f"driver were not asked; run doctor on {site.name}'s login node for those",
            )
    return report


def _machine_checks(
    report: Report, site: Site, request: LaunchRequest, argv: list[str], gpus: int
) -> None:
    """What only this machine can tell: srun's MPI plugins, the GPUs' driver."""
    plugin = next((a.split("=", 1)[1] for a in argv if a.startswith("--mpi=")), None)
    if plugin and request.controller == "mpi":
        offered = preflight.srun_mpi_plugins()
        if offered is None:
            report.add("srun-mpi", "warn", "srun is not here: its MPI plugins are not checked")
        else:
            try:
                preflight.check_mpi_plugin(plugin, offered)
                report.add("srun-mpi", "pass", f"srun offers --mpi={plugin}")
            except UserError as exc:
                report.add("srun-mpi", "fail", str(exc))
    facts = request.facts
    if facts is None or not facts.cuda or gpus <= 0:
        return
    driver = nvidia_driver()
    if driver is None and site.gpu_driver is None:
        needed = pitfalls.CUDA_MIN_DRIVER.get(facts.cuda.split(".")[0], "?")
        report.add(
            "gpu-driver",
            "warn",
            f"the nodes' NVIDIA driver is not known (no nvidia-smi here, no gpu_driver in site "
            f"{site.name}'s profile): CUDA {facts.cuda} needs >= {needed}; run doctor on a GPU "
            "node, or record gpu_driver in the profile",
        )
    elif driver is not None:
        found = pitfalls.cuda_driver(facts, gpus, driver, "this node (nvidia-smi)")
        for finding in found:
            report.add("gpu-driver", "fail", finding.message)
        if not found:
            report.add("gpu-driver", "pass", f"driver {driver} (nvidia-smi) runs CUDA {facts.cuda}")


# ---------------------------------------------------------------------------------- smoke

# Runs in the container, under the launch: rank and size, then an allreduce with its sum
# checked and the bus bandwidth measured. Lines start with SMOKE for the parser below.
SMOKE_SCRIPT = r"""
import socket, sys, time
try:
    import torch, horovod.torch as hvd
except ImportError:
    torch = None
    import numpy, tensorflow as tf, horovod.tensorflow as hvd
hvd.init()
rank, size, host = hvd.rank(), hvd.size(), socket.gethostname()
ctl = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "none"
print(f"SMOKE rank {rank} size {size} host {host} controller {ctl}", flush=True)

def check(device, op_name, count=4 * 1024 * 1024, rounds=5):
    if torch is not None:
        one = torch.full((4,), float(rank + 1), device=device)
        big = torch.ones(count, device=device)
        total = float(hvd.allreduce(one, op=hvd.Sum, name=f"{op_name}.sum")[0])
    else:
        one = tf.fill([4], float(rank + 1))
        big = tf.ones([count])
        total = float(hvd.allreduce(one, op=hvd.Sum, name=f"{op_name}.sum")[0])
    ok = abs(total - size * (size + 1) / 2) < 1e-6
    hvd.allreduce(big, op=hvd.Sum, name=f"{op_name}.warm")
    if device != "cpu":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for i in range(rounds):
        hvd.allreduce(big, op=hvd.Sum, name=f"{op_name}.{i}")
    if device != "cpu":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / rounds
    factor = 2 * (size - 1) / size if size > 1 else 1.0
    busbw = factor * count * 4 / seconds / 1e6
    word = "ok" if ok else f"WRONG sum {total:g}"
    print(f"SMOKE rank {rank} op {op_name} allreduce {word} busbw {busbw:.1f} MB/s", flush=True)

check("cpu", ctl)
if torch is not None and torch.cuda.is_available() and hvd.nccl_built():
    torch.cuda.set_device(hvd.local_rank())
    check(f"cuda:{hvd.local_rank()}", "nccl")
"""

_RANK = re.compile(r"^SMOKE rank (\d+) size (\d+) host (\S+) controller (\S+)$", re.M)
_OP = re.compile(
    r"^SMOKE rank (\d+) op (\S+) allreduce (ok|WRONG sum \S+) busbw ([0-9.]+) MB/s$", re.M
)


@dataclass(frozen=True)
class SmokeRank:
    rank: int
    size: int
    host: str
    controller: str


def parse_smoke(text: str) -> tuple[list[SmokeRank], dict[str, list[tuple[int, str, float]]]]:
    """(each rank's line, per operation: (rank, "ok" or the wrong sum, bus MB/s))."""
    ranks = [SmokeRank(int(r), int(s), h, c) for r, s, h, c in _RANK.findall(text)]
    ops: dict[str, list[tuple[int, str, float]]] = {}
    for rank, op, word, busbw in _OP.findall(text):
        ops.setdefault(op, []).append((int(rank), word, float(busbw)))
    return ranks, ops


def judge_smoke(controller: str, expected: int, exit_code: int, text: str, report: Report) -> None:
    """Report lines of one smoke launch: size, controller and allreduce per rank, per node."""
    name = f"smoke-{controller}"
    ranks, ops = parse_smoke(text)
    if not ranks:
        tail = " | ".join(text.strip().splitlines()[-3:]) or "no output"
        report.add(name, "fail", f"no rank started Horovod (exit {exit_code}): {tail}")
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
        bad = [f"rank {r}: {w}" for r, w, _ in rows if w != "ok"]
        if bad or len(rows) != expected:
            missing = expected - len(rows)
            why = "; ".join(bad) or f"{missing} ranks did not finish"
            report.add(f"allreduce-{op}", "fail", f"allreduce over {op}: {why}")
            continue
        per_host: dict[str, list[float]] = {}
        for r, _, bw in rows:
            per_host.setdefault(by_rank_host.get(r, "?"), []).append(bw)
        shown = ", ".join(f"{h} {min(v):.0f} MB/s" for h, v in sorted(per_host.items()))
        report.add(f"allreduce-{op}", "pass", f"sum correct on every rank; bus bandwidth {shown}")


class _Captured(Reporter):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []

    def job_output(self, text: str, *, stderr: bool) -> None:
        self.text.append(text)


def smoke(site: Site, request: LaunchRequest, report: Report) -> None:
    """Run the smoke job once per controller the image has, as a batch job on the nodes the
    request names, and add its lines to `report`."""
    from hvd_container.launcher.execute import execute

    _image, _missing, request = _image_with_facts(site, request)
    both: tuple[Literal["mpi", "gloo"], ...] = ("mpi", "gloo")
    controllers = [
        c for c in both
        if request.facts is None or request.facts.controllers is None
        or c in request.facts.controllers
    ]  # fmt: skip
    folder = Path(working_directory()) / ".hvd-container"
    folder.mkdir(exist_ok=True)
    script = folder / f"doctor-smoke-{os.getpid()}.py"
    write_text(script, SMOKE_SCRIPT)
    try:
        for controller in controllers:
            one = replace(request, script=str(script), args=[], controller=controller)
            one = replace(one, job_name=one.job_name or f"hvd-doctor-{controller}")
            expected = _ranks(site, one)
            captured = _Captured()
            try:
                code = execute(site, one, captured, batch=True)
            except UserError as exc:
                report.add(f"smoke-{controller}", "fail", str(exc))
                continue
            judge_smoke(controller, expected, code, "".join(captured.text), report)
    finally:
        script.unlink(missing_ok=True)


def _ranks(site: Site, request: LaunchRequest) -> int:
    """How many ranks the launch starts (the layout srun is asked for)."""
    from hvd_container.launcher.layout import resolve_layout

    layout = resolve_layout(site, request, [])
    return layout.ntasks or (layout.nodes or 1) * (layout.ntasks_per_node or 1)
