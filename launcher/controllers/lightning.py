"""PyTorch Lightning: its SLURMEnvironment reads srun's per-task variables itself.

Lightning refuses `srun -n N` ("Use --ntasks-per-node") and ignores Slurm when the job is
named `bash` or `interactive`, so the launch gives -N and --ntasks-per-node (a node's GPUs by
default) and a job name. A script is taken for a Lightning one when it imports lightning or
pytorch_lightning (a text scan, no import); one that cannot be read here (a path that exists
only on the cluster) when the image has Lightning and no Horovod.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import TYPE_CHECKING

from hvd_container.launcher.checks.declarations import check
from hvd_container.launcher.checks.verdict import Verdict, fail, warn
from hvd_container.launcher.controllers import Controller, Shape, _scan, script_label, stem
from hvd_container.launcher.plan.launch import Launch

if TYPE_CHECKING:
    from hvd_container.launcher.plan.request import LaunchRequest

    from hvd_container.facts import ImageFacts

BAD_JOB_NAMES = ("bash", "interactive")


def scan_script(script: str | Path) -> bool | None:
    """True when the file imports lightning or pytorch_lightning; None if unreadable."""
    found = _scan.read(str(script))
    if found.text is None:
        return False if found.why_not == "not a Python script" else None
    return found.shows(_scan.LIGHTNING) is not None


def trainer_layout(text: str) -> dict[str, int]:
    """The literal `devices=` and `num_nodes=` of the script's Trainer(...) calls (Python's
    own parser, no import): those every call gives the same whole number. A value that is
    not a literal int (`"auto"`, a variable, a list of GPU ids) is not judged here."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    seen: dict[str, set[object]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name != "Trainer":
            continue
        for keyword in node.keywords:
            if keyword.arg in ("devices", "num_nodes"):
                given = keyword.value
                literal = given.value if isinstance(given, ast.Constant) else None
                seen.setdefault(keyword.arg, set()).add(literal)
    found: dict[str, int] = {}
    for key, values in seen.items():
        (only,) = values if len(values) == 1 else (None,)
        if isinstance(only, int) and not isinstance(only, bool) and only > 0:
            found[key] = only
    return found


class Lightning(Controller):
    name = "lightning"
    requeues_on_signal = True  # SLURMEnvironment(auto_requeue=True), its default
    about = "PyTorch Lightning's own: it reads srun's variables (-N and --ntasks-per-node)"

    @classmethod
    def detect(cls, script: _scan.Script, facts: ImageFacts | None) -> str | None:
        if script.text is not None:
            return "" if script.shows(_scan.LIGHTNING) else None
        if script.why_not == "not a Python script":
            return None
        if facts is not None and facts.lightning and facts.horovod is False:
            return f"not readable here; {facts.source} has Lightning and no Horovod"
        return None

    def application(self, facts: ImageFacts | None) -> str | None:
        return "pytorch"  # Lightning is PyTorch's

    def shape(self, request: LaunchRequest, site_gpus: int) -> Shape:
        per_node = request.ntasks_per_node or max(site_gpus, 1)
        job_name = request.job_name or stem(request.script)
        return Shape(request.ntasks, request.nodes or 1, per_node, job_name)

    def missing_in_image(self, launch: Launch) -> Verdict | None:
        facts = launch.facts
        if facts is None or facts.lightning is not False:
            return None
        # a job may bring it on its own (PYTHONPATH, a bound virtualenv): said, not refused
        return warn(
            f"{facts.source} has no PyTorch Lightning: the script finds it only if the job brings it (PYTHONPATH, a bound virtualenv); add `lightning:` to the recipe, or pass the --controller the script is written for"
        )


@check("lightning", "Lightning gets -N, --ntasks-per-node and a job name it accepts")
def lightning_layout(launch: Launch) -> Verdict | None:
    request, script = launch.request, script_label(launch.request.script, launch.controller)
    if request.ntasks is not None:
        gpus = launch.site.gpus_per_node(launch.partition)
        per_node = request.ntasks_per_node or (
            min(request.ntasks, gpus) if gpus else request.ntasks
        )
        nodes = math.ceil(request.ntasks / per_node)
        return fail(
            f"{script} uses PyTorch Lightning, which refuses srun -n/--ntasks: use -N {nodes} --ntasks-per-node {per_node} instead of -n {request.ntasks}"
        )
    if request.job_name in BAD_JOB_NAMES:
        return fail(
            f"{script} uses PyTorch Lightning, which ignores Slurm in a job named {request.job_name!r}: pass another --job-name"
        )
    if launch.controller.reason:
        return warn(
            f"{script}: launched as a PyTorch Lightning script (-N, --ntasks-per-node, a job name)"
        )
    return None


@check("lightning-trainer", "Lightning's Trainer(devices=, num_nodes=) fit the launch's layout")
def lightning_trainer_layout(launch: Launch) -> Verdict | None:
    """A Trainer that asks for another layout than srun starts fails or hangs at start: its
    devices are the ranks of a node, its num_nodes the nodes."""
    found = _scan.read(launch.request.script)
    if found.text is None:
        return None
    asked = trainer_layout(found.text)
    layout = launch.layout
    have = {"devices": layout.ntasks_per_node, "num_nodes": layout.nodes}
    wrong = [key for key, value in asked.items() if have[key] is not None and have[key] != value]
    if not wrong:
        return None
    script = script_label(launch.request.script, launch.controller)
    said = ", ".join(f"{key}={asked[key]}" for key in ("devices", "num_nodes") if key in asked)
    nodes = asked.get("num_nodes", layout.nodes or 1)
    per_node = asked.get("devices", layout.ntasks_per_node or 1)
    ranks, on = layout.ntasks_per_node, layout.nodes
    return fail(
        f"{script} calls Trainer({said}), but the launch starts {ranks} rank{_s(ranks)} a node "
        f"on {on} node{_s(on)}: Lightning then fails or hangs at start; launch it with "
        f"-N {nodes} --ntasks-per-node {per_node}, or change the Trainer call"
    )


def _s(count: int | None) -> str:
    return "" if count == 1 else "s"
