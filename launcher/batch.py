"""The sbatch script for a launch: a pure function from (site, request) to text.

#SBATCH lines ask for the resources; the module loads and exports set up the job's shell;
the srun line is the same one `run` composes inside an allocation.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from hvd_container.launcher import shell
from hvd_container.launcher.compose import plan_launch
from hvd_container.launcher.request import LaunchRequest
from hvd_container.launcher.sites import Site

from hvd_container.core.atomic import write_text
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
    """(script text, warnings), from one plan of the launch outside an allocation."""
    plan = plan_launch(site, replace(request, inside_allocation=False))
    opts = [
        *plan.allocation,
        f"--output={request.job_output or OUTPUT_PATTERN}",
        f"--error={request.job_error or ERROR_PATTERN}",
    ]
    opts += site.scheduler.sbatch_options
    lines = ["#!/bin/bash", *(_sbatch_line(o) for o in opts)]
    lines.append(
        f"# hvd-container: site {site.name}, runtime {site.runtime_for(request.runtime).kind}"
    )
    lines.append("")
    if site.modules:
        lines.append(shell.join(["module", "load", *site.modules], one_line=True))
    for name, value in plan.env.items():
        lines.append(f"export {name}={shell.quote(value, one_line=True)}")
    if site.modules or plan.env:
        lines.append("")
    lines.append(shell.join(plan.step, one_line=True))
    return "\n".join(lines) + "\n", plan.warnings


# the script can carry --env values: readable and runnable by its owner only
SCRIPT_MODE = 0o700


def write_batch_script(target: str, text: str) -> None:
    """Write the script atomically, owner-only, replacing a regular file; a symbolic link is
    refused rather than followed or replaced (either would surprise someone)."""
    path = Path(target)
    if path.is_symlink():
        raise UserError(
            f"-o/--output {target}: is a symbolic link (to {os.readlink(path)}); name the file "
            "itself, or remove the link"
        )
    if path.is_dir():
        raise UserError(f"-o/--output {target}: is a directory, expected a file path")
    try:
        write_text(path, text, mode=SCRIPT_MODE)
    except OSError as exc:
        raise UserError(f"-o/--output {target}: cannot write: {exc.strerror or exc}") from None


def render_batch(site: Site, request: LaunchRequest) -> str:
    """The sbatch script text for request on site."""
    return render_batch_plan(site, request)[0]
