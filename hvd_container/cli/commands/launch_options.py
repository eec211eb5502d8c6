"""The options of `run`, `batch` and `jupyter`, as plain data, and what they turn into.

One table serves two parsers: commands/run.py makes typer options from it, and the quick dry
run (hvd_container/cli/quick_dry_run.py) makes an argparse parser from it, so that
`run --dry-run` needs no typer. Nothing here imports typer, the launcher or PyYAML at import.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from hvd_container.core.errors import UserError

if TYPE_CHECKING:
    from hvd_container.launcher.request import LaunchRequest
    from hvd_container.launcher.sites import Site

LAUNCH = "Launch"
RESOURCES = "Resources"
SCHEDULER = "Scheduler"
CONTAINER = "Container"


class Opt(NamedTuple):
    """One command-line option: its flags, the kind of value it takes, and its help."""

    flags: tuple[str, ...]
    kind: Literal["str", "int", "list", "flag"]
    help: str
    panel: str


OPTIONS: dict[str, Opt] = {
    "site": Opt(("--site",), "str", "Site name or profile path (default: $HVD_CONTAINER_SITE, config.yaml, cluster name, local).", LAUNCH),
    "image": Opt(("--image",), "str", "Image to run: a .sif/.sqfs path or a registry reference.", CONTAINER),
    "recipe": Opt(("--recipe",), "str", "Recipe the image was built from (name or path): names the image, enables checks.", CONTAINER),
    "ntasks": Opt(("-n", "--ntasks"), "int", "Total ranks.", RESOURCES),
    "nodes": Opt(("-N", "--nodes"), "int", "Nodes.", RESOURCES),
    "ntasks_per_node": Opt(("--ntasks-per-node",), "int", "Ranks per node.", RESOURCES),
    "gpus_per_node": Opt(("--gpus-per-node",), "int", "GPUs per node (default: one per rank).", RESOURCES),
    "gpus_per_task": Opt(("--gpus-per-task",), "int", "Discouraged (every rank sees only GPU 0): turned into per-node GPUs.", RESOURCES),
    "cpus_per_task": Opt(("-c", "--cpus-per-task"), "int", "CPUs per rank.", RESOURCES),
    "mpi": Opt(("--mpi",), "str", "srun --mpi plugin (default: the site's).", LAUNCH),
    "controller": Opt(("--controller",), "str", "Horovod controller: mpi or gloo.", LAUNCH),
    "runtime": Opt(("--runtime",), "str", "Container runtime instead of the site's: apptainer, singularity, shifter, podman-hpc, pyxis, charliecloud, none.", CONTAINER),
    "modules": Opt(("--module",), "list", "Extra shifter module (repeatable).", CONTAINER),
    "binds": Opt(("-B", "--bind"), "list", "Bind mount SRC[:DST[:ro|rw]] (repeatable).", CONTAINER),
    "env": Opt(("-e", "--env"), "list", "Environment variable NAME=VALUE (repeatable). Not sbatch's -e/--error: that is --job-error.", LAUNCH),
    "workdir": Opt(("--workdir",), "str", "Working directory inside the container.", CONTAINER),
    "job_name": Opt(("-J", "--job-name"), "str", "Job name.", SCHEDULER),
    "time": Opt(("-t", "--time"), "str", "Time limit (HH:MM:SS).", SCHEDULER),
    "partition": Opt(("-p", "--partition"), "str", "Partition.", SCHEDULER),
    "account": Opt(("-A", "--account"), "str", "Account.", SCHEDULER),
    "qos": Opt(("-q", "--qos"), "str", "QOS.", SCHEDULER),
    "constraint": Opt(("-C", "--constraint"), "str", "Node constraint.", SCHEDULER),
    "comment": Opt(("--comment",), "str", "Job comment (mandatory on some sites).", SCHEDULER),
    "job_output": Opt(("--job-output",), "str", "The job's stdout file, sbatch's -o/--output (default %x_%j.out: job name and id).", SCHEDULER),
    "job_error": Opt(("--job-error",), "str", "The job's stderr file, sbatch's -e/--error (default %x_%j.err).", SCHEDULER),
    "dry_run": Opt(("--dry-run",), "flag", "Print the command line and exit.", LAUNCH),
    "detach": Opt(("--detach",), "flag", "Outside an allocation: submit and return.", LAUNCH),
    "salloc": Opt(("--salloc",), "flag", "Outside an allocation: run interactively under salloc instead of sbatch.", LAUNCH),
    "json": Opt(("--json",), "flag", "One JSON object on stdout instead of the line (run: with --dry-run) or the script (batch); fields: `schema output`.", LAUNCH),
}  # fmt: skip

# `run`'s own options; the others are build_request's keywords. `controller` defaults to mpi.
RUN_ONLY = ("dry_run", "detach", "salloc", "json")
DEFAULTS: dict[str, Any] = {"controller": "mpi"}
SCRIPT_HELP = "Training script (.py runs with the image's python) or program."
ARGS_HELP = "Arguments for the script, passed as given."

# Options stop at SCRIPT: everything after it is the script's, even `--dry-run` or `-n`.
# Unknown options before it are errors: were `--ntask 8` taken as the script, a `--dry-run`
# after it would go to the script and a real job would start. A script whose name starts
# with '-' goes after `--`.
CONTEXT = {"allow_interspersed_args": False}


def plain_count(value: str | int, flags: tuple[str, ...]) -> int:
    """A count as Slurm reads one: ASCII decimal digits only. int() alone would take `1_6`,
    Unicode digits and surrounding spaces, which srun and sbatch do not."""
    if isinstance(value, int):
        return value
    if not (value.isascii() and value.isdigit()):
        flag = "/".join(sorted(flags, key=lambda f: not f.startswith("--")))
        raise UserError(f"{flag}: {value!r} is not a valid int (decimal digits only)")
    return int(value)


def parse_env(values: list[str] | None) -> dict[str, str]:
    """NAME=VALUE items of --env as a mapping."""
    env: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(f"--env: expected NAME=VALUE, got {item!r}")
        env[name] = value
    return env


def build_request(**options: Any) -> tuple[Site, LaunchRequest]:
    """(site, LaunchRequest) from the CLI options; recipe facts loaded only when asked for."""
    from hvd_container.launcher.request import LaunchRequest
    from hvd_container.launcher.sites import select_site

    passed_over: list[str] = []
    site = select_site(options.pop("site"), passed_over)
    if passed_over:
        from hvd_container.cli.terminal import warn

        warn(passed_over)
    recipe = options.get("recipe")
    facts = None
    if recipe:
        from hvd_container.launcher.facts import facts_from_recipe

        facts = facts_from_recipe(str(recipe))
    controller = options.pop("controller")
    for name, opt in OPTIONS.items():
        if opt.kind == "int" and options.get(name) is not None:
            options[name] = plain_count(options[name], opt.flags)
    options["env"] = parse_env(options.pop("env"))
    for key in ("binds", "modules", "args"):
        options[key] = list(options.get(key) or [])
    request = LaunchRequest(
        facts=facts,
        controller=controller,
        inside_allocation=bool(os.environ.get("SLURM_JOB_ID")),
        **options,
    )
    return site, request


def dry_run_text(site: Site, request: LaunchRequest) -> tuple[str, list[str]]:
    """(the one shell-quoted launch line, the warnings): what `run --dry-run` prints."""
    record = dry_run_record(site, request)
    return record["command"], record["warnings"]


def dry_run_record(site: Site, request: LaunchRequest) -> dict[str, Any]:
    """What a dry run shows, as data: `run --dry-run --json` prints it (json_output's
    `run-dry-run` record)."""
    from hvd_container.launcher.compose import plan_launch
    from hvd_container.launcher.prepare import prepare_launch

    # the same preparation as a real run, minus its side effects
    prepared = prepare_launch(site, request, "show")
    plan = plan_launch(prepared.site, prepared.request)
    return {
        "site": prepared.site.name,
        "runtime": prepared.site.runtime_for(prepared.request.runtime).kind,
        "image": plan.image,
        "argv": plan.argv,
        "env": plan.env,
        "command": plan.shell_line(),
        "inside_allocation": prepared.request.inside_allocation,
        "allocation": plan.allocation,
        "step": plan.step,
        "warnings": list(dict.fromkeys([*prepared.warnings, *plan.warnings])),
    }


def dry_run_output(values: dict[str, Any]) -> tuple[str, list[str]]:
    """(what stdout shows, the warnings for stderr) of `run --dry-run [--json]`, from the parsed
    options: the one function both parsers call."""
    from hvd_container.cli.json_output import json_errors

    as_json = bool(values.get("json"))
    with json_errors(as_json):
        site, request = build_request(**{k: v for k, v in values.items() if k not in RUN_ONLY})
        record = dry_run_record(site, request)
    if as_json:
        import json

        return json.dumps({"event": "result", **record}, ensure_ascii=True), record["warnings"]
    return record["command"], record["warnings"]
