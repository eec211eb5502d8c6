"""From a site profile and a launch request to the srun argv (never a shell string).

`plan_launch` does the work and returns the argv, the environment srun must run with and the
warnings; `compose_srun` is its argv. Mistakes from launcher.pitfalls become one-line errors.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Literal

from hvd_container.launcher import pitfalls
from hvd_container.launcher.facts import ImageFacts
from hvd_container.launcher.layout import Layout, gpu_flags, layout_options, resolve_layout
from hvd_container.launcher.runtimes import Invocation, runtime_module
from hvd_container.launcher.sites import Site, env_name_problem, valid_slurm_time

from hvd_container.core.errors import UserError


@dataclass
class LaunchRequest:
    """Everything a user asks for in one launch; None means "the site's default"."""

    script: str
    args: list[str] = field(default_factory=list)
    image: str | None = None
    recipe: str | None = None
    facts: ImageFacts | None = None  # filled from the recipe (or image labels) by the caller
    ntasks: int | None = None
    nodes: int | None = None
    ntasks_per_node: int | None = None
    gpus_per_node: int | None = None
    gpus_per_task: int | None = None
    cpus_per_task: int | None = None
    mpi: str | None = None  # srun --mpi= plugin; overrides the site's
    controller: Literal["mpi", "gloo"] = "mpi"
    runtime: str | None = None  # another runtime than the site's default
    modules: list[str] = field(default_factory=list)  # extra shifter modules
    job_name: str | None = None
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    comment: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    binds: list[str] = field(default_factory=list)
    workdir: str | None = None
    lightning: bool | None = None  # None: scan the script
    inside_allocation: bool = False  # True inside salloc/sbatch: no resource options on srun


@dataclass(frozen=True)
class LaunchPlan:
    """What one launch runs: the command, its environment and what was found on the way."""

    argv: list[str]  # starts with "srun"
    env: dict[str, str]  # variables srun must see (site env, then the request's)
    warnings: list[str]
    layout: Layout
    image: str | None

    def command(self) -> list[str]:
        """The argv with the environment spelled out (`env K=V srun ...`) for display."""
        if not self.env:
            return list(self.argv)
        return ["env", *(f"{k}={v}" for k, v in self.env.items()), *self.argv]

    def shell_line(self) -> str:
        return shlex.join(self.command())


def _normalize_bind(bind: str, what: str) -> str:
    parts = bind.split(":")
    if not bind or not parts[0].startswith("/") or len(parts) > 3:
        raise UserError(f"{what}: {bind!r} is not SRC[:DST[:ro|rw]] with absolute paths")
    if len(parts) == 3 and parts[2] not in ("ro", "rw"):
        raise UserError(f"{what}: {bind!r}: the option must be ro or rw")
    if len(parts) == 1:
        parts.append(parts[0])
    if not parts[1].startswith("/"):
        raise UserError(f"{what}: {bind!r}: the destination must be an absolute path")
    return ":".join(parts)


def resolve_image(site: Site, request: LaunchRequest, kind: str) -> str | None:
    """The image the launch runs: --image, else the site's images.template filled from the
    recipe's name and version (None for runtime none without an image)."""
    if request.image:
        return request.image
    facts = request.facts
    if facts is None or facts.name is None:
        if kind == "none":
            return None
        raise UserError(
            f"site {site.name} runs containers with {kind}: pass --image IMAGE or --recipe RECIPE"
        )
    template = site.images.template or "{name}:{version}"
    try:
        ref = template.format(
            name=facts.name,
            version=facts.version or "latest",
            registry=site.images.registry or "",
            dir=site.images.dir or ".",
        )
    except (KeyError, IndexError, AttributeError, ValueError) as exc:
        # profiles are checked when loaded; this guards sites built in code
        detail = f"unknown placeholder {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UserError(
            f"{site.source}: images.template: {detail} (allowed: name, version, registry, dir)"
        ) from None
    if site.images.registry and "{registry}" not in template and not ref.startswith("/"):
        ref = f"{site.images.registry.rstrip('/')}/{ref}"
    return ref


def allocation_options(site: Site, request: LaunchRequest) -> list[str]:
    """Options that ask Slurm for resources: on srun outside an allocation, or as #SBATCH."""
    sched = site.scheduler
    opts: list[str] = []
    for flag, value in (
        ("--partition", request.partition or sched.partition),
        ("--account", request.account or sched.account),
        ("--qos", request.qos or sched.qos),
        ("--constraint", request.constraint or sched.constraint),
        ("--comment", request.comment or sched.comment.default),
        ("--time", request.time or sched.time),
    ):
        if value:
            opts.append(f"{flag}={value}")
    return opts


def _program(request: LaunchRequest, python: str) -> list[str]:
    # a leading '-' would be read as an option by python or the runtime
    script = f"./{request.script}" if request.script.startswith("-") else request.script
    if script.endswith(".py"):
        return [python, script, *request.args]
    return [script, *request.args]


def _env(site: Site, request: LaunchRequest) -> dict[str, str]:
    env = dict(site.env)
    for name, value in request.env.items():
        problem = env_name_problem(name)
        if problem:
            raise UserError(f"--env: {problem}")
        env[name] = value
    return env


def plan_launch(site: Site, request: LaunchRequest) -> LaunchPlan:
    """The srun argv, its environment and the warnings for one launch."""
    warnings: list[str] = []
    runtime = site.runtime_for(request.runtime)
    partition = request.partition or site.scheduler.partition
    if (
        request.partition
        and site.scheduler.partitions
        and request.partition not in site.scheduler.partitions
    ):
        known = ", ".join(site.scheduler.partitions)
        raise UserError(
            f"--partition: {request.partition!r} is not a partition of site {site.name} (allowed: {known})"
        )
    if request.time and not valid_slurm_time(request.time):
        raise UserError(
            f"--time: {request.time!r} is not a Slurm time (MINUTES, HH:MM:SS or D-HH:MM:SS)"
        )
    layout = resolve_layout(site, request, warnings)
    needs_allocation = not request.inside_allocation
    pitfalls.apply(
        pitfalls.mandatory_comment(
            site, request.comment or site.scheduler.comment.default, needs_allocation
        ),
        warnings,
    )
    pitfalls.apply(
        pitfalls.account_suffix(site, request.account or site.scheduler.account, needs_allocation),
        warnings,
    )
    pitfalls.apply(pitfalls.image_arch(site, partition, request.facts), warnings)
    mpi = request.mpi or site.mpi
    # One task (a notebook, a single-rank run) is a correct size-1 job whatever the plugin.
    single_task = layout.ntasks == 1 or (
        layout.ntasks is None and (layout.nodes or 1) == 1 and (layout.ntasks_per_node or 1) == 1
    )
    if not single_task:
        pitfalls.apply(
            pitfalls.mpi_plugin(mpi, request.controller, request.facts, runtime.kind), warnings
        )
    pitfalls.apply(pitfalls.cleanenv(runtime), warnings)
    modules, findings = pitfalls.shifter_modules(runtime, request.modules)
    pitfalls.apply(findings, warnings)
    pitfalls.apply(pitfalls.runtime_gpu(site, runtime, modules, layout.gpus_per_node), warnings)
    pitfalls.apply(pitfalls.image_ignored(runtime.kind, request.image), warnings)

    image = resolve_image(site, request, runtime.kind)
    env = _env(site, request)
    pitfalls.apply(pitfalls.nccl_interface(site, env, layout.nodes, layout.gpus_per_node), warnings)
    binds = [_normalize_bind(b, f"{site.source}: binds") for b in site.binds]
    binds += [_normalize_bind(b, "--bind") for b in request.binds]
    invocation = Invocation(
        kind=runtime.kind,
        image=image if runtime.kind != "none" else None,
        program=_program(request, runtime.python),
        command=runtime.command,
        gpu=runtime.gpu and layout.gpus_per_node > 0,
        flags=list(runtime.flags),
        modules=modules,
        binds=binds,
        workdir=request.workdir,
        env_names=list(env),
    )
    wrapped = runtime_module(runtime.kind).wrap(invocation)

    argv = ["srun"]
    if mpi:
        argv.append(f"--mpi={mpi}")
    argv += site.scheduler.srun_options
    if needs_allocation:
        argv += allocation_options(site, request)
    if layout.job_name:
        argv.append(f"--job-name={layout.job_name}")
    argv += layout_options(layout)
    if needs_allocation or layout.gpu_bind_none or request.gpus_per_node is not None:
        argv += gpu_flags(site.scheduler.gpu_request, layout.gpus_per_node)
    if layout.gpu_bind_none and layout.gpus_per_node:
        argv.append("--gpu-bind=none")
    cpus = request.cpus_per_task or (site.scheduler.cpus_per_task if needs_allocation else None)
    if cpus:
        argv.append(f"--cpus-per-task={cpus}")
    argv += wrapped.srun_flags
    argv += wrapped.argv
    return LaunchPlan(argv, env, warnings, layout, image)


def compose_srun(site: Site, request: LaunchRequest) -> list[str]:
    """The argv of the srun line (environment: `plan_launch(...).env`)."""
    return plan_launch(site, request).argv
