"""From a site profile and a launch request to the srun argv (never a shell string).

`plan_launch` does the work and returns the argv, the environment srun must run with and the
warnings; `compose_srun` is its argv. Mistakes from launcher.pitfalls become one-line errors.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hvd_container.launcher import pitfalls, shell
from hvd_container.launcher.binds import parse_bind, split_binds
from hvd_container.launcher.layout import Layout, gpu_flags, layout_options, resolve_layout
from hvd_container.launcher.request import LaunchRequest, check, program_path
from hvd_container.launcher.runtimes import Invocation, runtime_module
from hvd_container.launcher.sites import Site

from hvd_container.core.errors import UserError


@dataclass(frozen=True)
class LaunchPlan:
    """What one launch runs: the command, its environment and what was found on the way."""

    argv: list[str]  # starts with "srun": standalone, or the step when inside an allocation
    env: dict[str, str]  # variables srun must see (site env, then the request's)
    warnings: list[str]
    layout: Layout
    image: str | None
    # Outside an allocation, the same launch as an allocation and a step in it:
    allocation: list[str]  # resource options for sbatch (#SBATCH) or salloc
    step: list[str]  # the srun line to run inside that allocation

    def command(self) -> list[str]:
        """The argv with the environment spelled out (`env K=V srun ...`) for display."""
        if not self.env:
            return list(self.argv)
        return ["env", *(f"{k}={v}" for k, v in self.env.items()), *self.argv]

    def shell_line(self) -> str:
        return shell.join(self.command())


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
    script = program_path(request.script)
    if script.endswith(".py"):
        return [python, script, *request.args]
    return [script, *request.args]


def _env(site: Site, request: LaunchRequest) -> dict[str, str]:
    return {**site.env, **request.env}


def _binds(site: Site, request: LaunchRequest) -> list[str]:
    """Site binds, then --bind, each as SRC:DST[:OPT]."""
    out = []
    for what, binds in ((f"{site.source}: binds", site.binds), ("--bind", request.binds)):
        for bind in (one for item in binds for one in split_binds(item)):
            parsed = parse_bind(bind)
            if isinstance(parsed, str):
                raise UserError(f"{what}: {parsed}")
            out.append(str(parsed))
    return out


def plan_launch(
    site: Site, request: LaunchRequest, checks: pitfalls.Checks | None = None
) -> LaunchPlan:
    """The srun argv, its environment and the warnings for one launch, planned once: outside
    an allocation also as resource options for sbatch/salloc plus the step run inside.

    `checks` collects the named pitfall checks (doctor keeps going past errors)."""
    check(site, request)
    warnings: list[str] = []
    run = (checks or pitfalls.Checks(warnings)).run
    if checks is not None:
        warnings = checks.warnings
    runtime = site.runtime_for(request.runtime)
    partition = request.partition or site.scheduler.partition
    layout = resolve_layout(site, request, warnings)
    needs_allocation = not request.inside_allocation
    comment = request.comment or site.scheduler.comment.default
    run("comment", pitfalls.mandatory_comment(site, comment, needs_allocation))
    account = request.account or site.scheduler.account
    run("account", pitfalls.account_suffix(site, account, needs_allocation))
    run("arch", pitfalls.image_arch(site, partition, request.facts))
    # One task (a notebook, a single-rank run) is a correct size-1 job whatever the plugin.
    single_task = layout.ntasks == 1 or (
        layout.ntasks is None and (layout.nodes or 1) == 1 and (layout.ntasks_per_node or 1) == 1
    )
    mpi = request.mpi or _image_plugin(site, request, runtime.kind, single_task, warnings)
    if not single_task:
        run("mpi-plugin", pitfalls.mpi_plugin(mpi, request.controller, request.facts, runtime.kind))
    run("controller", pitfalls.controller_built(request.controller, request.facts))
    run("cleanenv", pitfalls.cleanenv(runtime))
    modules, findings = pitfalls.shifter_modules(runtime, request.modules)
    run("modules", findings)
    if _shifter_needs_mpich(runtime.kind, modules, request, single_task):
        # naming modules replaces the site's default ones, and those bring Cray MPICH
        modules = [*modules, "mpich"]
    if not single_task and request.controller == "mpi":
        run("mpi-abi", pitfalls.mpi_abi(runtime, modules, request.facts))
    run("glibc", pitfalls.injected_glibc(runtime, request.facts))
    gpn = layout.gpus_per_node
    run("runtime-gpu", pitfalls.runtime_gpu(site, runtime, modules, gpn))
    run("gpu-request", pitfalls.gpu_image_without_gpus(request.facts, gpn, layout.nodes))
    run("gpu-operations", pitfalls.gpu_tensor_operations(request.facts, gpn))
    where = f"site {site.name}'s profile (gpu_driver)"
    run("cuda-driver", pitfalls.cuda_driver(request.facts, gpn, site.gpu_driver, where))
    run("image-ignored", pitfalls.image_ignored(runtime.kind, request.image))

    image = resolve_image(site, request, runtime.kind)
    recipe_ref = None if request.image else image  # the image was named from the recipe
    run(
        "registry",
        pitfalls.recipe_image_without_registry(site, runtime.kind, request.recipe, recipe_ref),
    )
    ranks = layout.ntasks or (layout.nodes or 1) * (layout.ntasks_per_node or 1)
    run("registry-per-rank", pitfalls.registry_image_per_rank(runtime.kind, image, ranks))
    run("image-location", pitfalls.image_location(site, _image_file(image, runtime.kind)))
    env = _env(site, request)
    run("nccl-interface", pitfalls.nccl_interface(site, env, layout.nodes, gpn))
    run("nccl-network", pitfalls.nccl_network(site, runtime, modules, env, layout.nodes, gpn))
    invocation = Invocation(
        kind=runtime.kind,
        image=image if runtime.kind != "none" else None,
        program=_program(request, runtime.python),
        command=runtime.command,
        gpu=runtime.gpu and layout.gpus_per_node > 0,
        flags=list(runtime.flags),
        modules=modules,
        binds=_binds(site, request),
        workdir=request.workdir,
        env_names=list(env),
    )
    wrapped = runtime_module(runtime.kind).wrap(invocation)

    sched = site.scheduler
    head = ["srun", *([f"--mpi={mpi}"] if mpi else []), *sched.srun_options]
    tasks = ([f"--job-name={layout.job_name}"] if layout.job_name else []) + layout_options(layout)
    gpus = gpu_flags(sched.gpu_request, layout.gpus_per_node)
    bind_none = ["--gpu-bind=none"] if layout.gpu_bind_none and layout.gpus_per_node else []
    container = [*wrapped.srun_flags, *wrapped.argv]
    own_cpus = [f"--cpus-per-task={request.cpus_per_task}"] if request.cpus_per_task else []
    # inside an allocation the step inherits GPUs and CPUs unless they were asked for
    step_gpus = gpus if layout.gpu_bind_none or request.gpus_per_node is not None else []
    step = [*head, *tasks, *step_gpus, *bind_none, *own_cpus, *container]
    if not needs_allocation:
        return LaunchPlan(step, env, warnings, layout, image, [], step)

    cpus = request.cpus_per_task or sched.cpus_per_task
    cpu_opts = [f"--cpus-per-task={cpus}"] if cpus else []
    resources = allocation_options(site, request)
    argv = [*head, *resources, *tasks, *gpus, *bind_none, *cpu_opts, *container]
    job_name = layout.job_name or request.job_name or _stem(request.script)
    allocation = [f"--job-name={job_name}"]
    for flag, value in (
        ("--nodes", layout.nodes),
        ("--ntasks", layout.ntasks),
        ("--ntasks-per-node", layout.ntasks_per_node),
    ):
        if value is not None:
            allocation.append(f"{flag}={value}")
    allocation += [*gpus, *cpu_opts, *resources]
    return LaunchPlan(argv, env, warnings, layout, image, allocation, step)


def _image_file(image: str | None, kind: str) -> str | None:
    """The absolute path of a file or directory image here (None for registry references)."""
    from hvd_container.launcher.runtimes import is_file_ref

    if not image or kind in ("shifter", "podman-hpc", "pyxis", "none"):
        return None
    if not (is_file_ref(image) or kind == "charliecloud"):
        return None
    path = os.path.abspath(os.path.expanduser(image))
    # one that does not exist here is not judged: the missing-image check speaks of it, and a
    # dry run may name an image that lives on the cluster
    return path if os.path.exists(path) else None


def _image_plugin(
    site: Site, request: LaunchRequest, kind: str, single_task: bool, warnings: list[str]
) -> str | None:
    """The site's default --mpi plugin, or, when the image's MPI speaks another PMI only (and
    no --mpi was given), the one it speaks: Debian's Open MPI speaks PMIx only, and a site whose
    default is pmi2 would start every rank as 'rank 0 of 1'."""
    facts = request.facts
    default = site.mpi
    if (
        default is None
        or single_task
        or kind == "none"
        or request.controller != "mpi"
        or facts is None
        or not facts.mpi_pmi
    ):
        return default
    family = "pmix" if default.startswith("pmix") else default
    if family in facts.mpi_pmi:
        return default
    chosen = facts.mpi_pmi[0]
    warnings.append(
        f"site {site.name} launches with --mpi={default}, but {facts.source} speaks "
        f"{', '.join(facts.mpi_pmi)} only: using --mpi={chosen} (pass --mpi to choose)"
    )
    return chosen


def _shifter_needs_mpich(
    kind: str, modules: list[str], request: LaunchRequest, single_task: bool
) -> bool:
    """Shifter's --module list replaces the administrator's default modules (NERSC's
    udiRoot.conf: defaultModules), among them mpich: an MPI launch names it again."""
    if kind != "shifter" or not modules or "mpich" in modules or single_task:
        return False
    if request.controller != "mpi":
        return False
    facts = request.facts
    return facts is None or facts.mpi_pmi != ()  # an image known to have no MPI needs none


def _stem(script: str) -> str:
    name = script.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".py") else name or "job"


def compose_srun(site: Site, request: LaunchRequest) -> list[str]:
    """The argv of the srun line (environment: `plan_launch(...).env`)."""
    return plan_launch(site, request).argv
