"""The sbatch script for a launch: a pure function from (site, request) to text.

#SBATCH lines ask for the resources; the module loads and exports set up the job's shell;
the srun line is the same one `run` composes inside an allocation.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from hvd_container.launcher.compose import LaunchRequest, allocation_options, plan_launch
from hvd_container.launcher.sites import Site

from hvd_container.core.errors import UserError

OUTPUT_PATTERN = "%x_%j.out"
ERROR_PATTERN = "%x_%j.err"


def _sbatch_line(option: str) -> str:
    if any(c.isspace() for c in option):
        raise UserError(
            f"#SBATCH {option!r}: values in #SBATCH lines cannot contain spaces; choose a value without them"
        )
    return f"#SBATCH {option}"


def render_batch_plan(site: Site, request: LaunchRequest) -> tuple[str, list[str]]:
    """(script text, warnings)."""
    outside = plan_launch(site, replace(request, inside_allocation=False))
    inside = plan_launch(site, replace(request, inside_allocation=True))
    layout = outside.layout
    sched = site.scheduler
    job_name = layout.job_name or request.job_name or _stem(request.script)
    opts = [f"--job-name={job_name}"]
    if layout.nodes is not None:
        opts.append(f"--nodes={layout.nodes}")
    if layout.ntasks is not None:
        opts.append(f"--ntasks={layout.ntasks}")
    if layout.ntasks_per_node is not None:
        opts.append(f"--ntasks-per-node={layout.ntasks_per_node}")
    if layout.gpus_per_node and sched.gpu_request == "gres":
        opts.append(f"--gres=gpu:{layout.gpus_per_node}")
    elif layout.gpus_per_node and sched.gpu_request == "gpus-per-node":
        opts.append(f"--gpus-per-node={layout.gpus_per_node}")
    cpus = request.cpus_per_task or sched.cpus_per_task
    if cpus:
        opts.append(f"--cpus-per-task={cpus}")
    opts += allocation_options(site, request)
    opts += [f"--output={OUTPUT_PATTERN}", f"--error={ERROR_PATTERN}"]
    opts += sched.sbatch_options

    lines = ["#!/bin/bash", *(_sbatch_line(o) for o in opts)]
    lines.append(
        f"# hvd-container: site {site.name}, runtime {site.runtime_for(request.runtime).kind}"
    )
    lines.append("")
    if site.modules:
        lines.append(shlex.join(["module", "load", *site.modules]))
    for name, value in inside.env.items():
        lines.append(f"export {name}={shlex.quote(value)}")
    if site.modules or inside.env:
        lines.append("")
    lines.append(shlex.join(inside.argv))
    warnings = list(dict.fromkeys([*outside.warnings, *inside.warnings]))
    return "\n".join(lines) + "\n", warnings


def render_batch(site: Site, request: LaunchRequest) -> str:
    """The sbatch script text for request on site."""
    return render_batch_plan(site, request)[0]


def _stem(script: str) -> str:
    name = script.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".py") else name or "job"
