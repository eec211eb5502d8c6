"""One plan for every way a launch leaves hvd-container.

`plan(site, request, mode)` checks the request once, finds the image and its facts, lets the
controller lay out the tasks and the runtime prepare the container, runs every registered
check (launcher/checks/registry.py) and composes the srun line, its environment and, outside an
allocation, the batch script. `run --dry-run`, `run`, `batch`, `jupyter` and `doctor` (and its
smoke job) all use it, so the line a dry run prints is the line a run executes.

Modes: "run" (inside an allocation the step, outside it the job `run` submits), "batch" (a
script, perhaps for another machine), "jupyter" and "smoke" (one-off jobs submitted from
here). `dry_run` computes everything without side effects: no image is unpacked, no engine
or Slurm is asked. A launch refuses at the first failed check; `keep_going` (doctor) returns
them all.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from typing import Literal

from hvd_container.launcher import controllers, runtimes, slurm
from hvd_container.launcher.checks.registry import Result, refuse_on_failure, run_checks
from hvd_container.launcher.controllers import stem
from hvd_container.launcher.plan.binds import Bind, expand, parse_bind, split_binds
from hvd_container.launcher.plan.image import launch_facts, resolve_image
from hvd_container.launcher.plan.launch import Launch, Mode
from hvd_container.launcher.plan.layout import (
    Layout,
    allocation_tasks,
    gpu_flags,
    layout_options,
    resolve_layout,
    with_spares,
)
from hvd_container.launcher.plan.memory import memory_choice
from hvd_container.launcher.plan.request import (
    DEFAULT_MAX_RESTARTS,
    LaunchRequest,
    check,
    grace_of,
    run_options,
)
from hvd_container.launcher.plan.scheduler_values import requested_values
from hvd_container.launcher.plan.signature import pinned_image, resolve_signature
from hvd_container.launcher.run import hang
from hvd_container.launcher.runtimes import Invocation
from hvd_container.launcher.script import shell
from hvd_container.launcher.script.batch import (
    CHECKPOINT_GRACE,
    CHECKPOINT_SIGNAL,
    ERROR_PATTERN,
    OUTPUT_PATTERN,
    BatchScript,
    PinnedImage,
    StagedImage,
    UntilDone,
    script_text,
    step_lines,
    until_done_options,
)
from hvd_container.launcher.script.staging import stage_command, stage_point, staged_step
from hvd_container.launcher.sites.loader import site_ref
from hvd_container.launcher.sites.machine import ThisMachine
from hvd_container.launcher.sites.model import Site

from hvd_container.core.errors import UserError

How = Literal["step", "sbatch", "salloc"]
SCRIPT_END = "HVD_CONTAINER_SCRIPT"  # the here-document's end; no line of a script is it
# sbatch-only options that salloc does not take
_NOT_FOR_SALLOC = ("--output=", "--error=", "--open-mode=", "--parsable")


@dataclass(frozen=True)
class Plan:
    """What one launch runs, and what its checks found."""

    launch: Launch
    image: str | None  # as the runtime runs it (an unpacked directory, say)
    # what `run` executes, unchanged: the srun step inside an allocation; outside one `sbatch`
    # with the script on its standard input, or (asked for) `salloc <allocation> <step>`
    argv: list[str]
    env: dict[str, str]  # the variables srun must see (site's, then the request's)
    allocation: list[str]  # outside an allocation: the resource options for sbatch/salloc
    step: list[str]  # the srun line run inside that allocation
    script: str | None  # outside an allocation: the batch script
    results: list[Result]
    notes: list[str]  # what preparing the launch found (environment lines not passed on)
    how: How = "step"
    files: dict[str, str] = field(default_factory=dict)  # the runtime's, which the step reads
    folders: list[str] = field(default_factory=list)  # the runtime's, made before the step

    @property
    def site(self) -> Site:
        return self.launch.site

    @property
    def request(self) -> LaunchRequest:
        return self.launch.request

    @property
    def layout(self) -> Layout:
        return self.launch.layout

    @property
    def warnings(self) -> list[str]:
        found = [r.message for r in self.results if r.status == "warn" and not r.acknowledged]
        return list(dict.fromkeys([*found, *self.notes]))

    def command(self) -> list[str]:
        """The argv with the environment spelled out (`env K=V srun ...`) for display; a
        submitted script exports its variables itself."""
        if not self.env or self.how == "sbatch":
            return list(self.argv)
        return ["env", *(f"{k}={v}" for k, v in self.env.items()), *self.argv]

    def shell_line(self) -> str:
        """What `run` executes, as a shell would run it: the command line, and for sbatch the
        script it reads from its standard input, as a here-document."""
        if self.how != "sbatch":
            return "\n".join(step_lines(self.command(), one_line=False))
        line = shell.join(self.command())
        assert self.script is not None and f"\n{SCRIPT_END}\n" not in f"\n{self.script}"
        return f"{line} <<'{SCRIPT_END}'\n{self.script}{SCRIPT_END}"


def plan(
    site: Site,
    request: LaunchRequest,
    mode: Mode = "run",
    *,
    dry_run: bool = False,
    keep_going: bool = False,
    machine: ThisMachine | None = None,
    salloc: bool = False,
) -> Plan:
    """The launch of `request` on `site`, in three steps: resolve what it is made of, judge
    it with every check, compose its commands. Raises UserError for a request that cannot be
    run and, unless `keep_going`, for the first failed check (with it, a launch that fails a
    check comes back with every result and no command). `machine`: ask this machine what only
    it can tell (srun's plugins, the GPUs' driver); None asks nothing. Outside an allocation
    the job is submitted with sbatch, or with `salloc` run in an interactive allocation."""
    launch = resolve(site, request, mode, dry_run=dry_run, keep_going=keep_going, machine=machine)
    results = run_checks(launch, every=keep_going)  # doctor lists every check
    if not keep_going:
        refuse_on_failure(results)
    elif any(r.status == "fail" for r in results):
        # doctor: a launch a check fails is judged, not composed
        return Plan(launch, None, [], {}, [], [], None, results, [])
    return compose(launch, results, salloc=salloc, prepare_only=dry_run or keep_going)


def resolve(
    site: Site,
    request: LaunchRequest,
    mode: Mode,
    *,
    dry_run: bool,
    keep_going: bool,
    machine: ThisMachine | None,
) -> Launch:
    """What the launch is made of, each decided once: the runtime, the image and its facts,
    the controller, the layout, srun's MPI plugin and the job's environment."""
    if mode != "run":
        request = replace(request, inside_allocation=False)  # always a job of its own
    check(site, request)
    binds = parsed_binds(site, request)
    runtime = runtimes.runtime(site.runtime_for(request.runtime))
    scheduled = requested_values(site, request)
    partition = scheduled.partition
    image, origin = resolve_image(site, request, runtime)
    unreadable = None
    try:
        facts = launch_facts(request, image, runtime, ask_docker=not dry_run or keep_going)
    except UserError as exc:  # not an image (a broken SIF): the image check says so
        facts, unreadable = request.facts, str(exc)
    controller = controllers.choose(request, facts, site)
    layout = resolve_layout(site, request, controller, partition)
    cpus = rank_cpus(site, request, layout, partition)
    memory = memory_choice(site, request, layout, partition, cpus)
    mpi, _note = controller.mpi_plugin(site, request, facts, layout.single_task)
    env = {
        **site.env,
        **(site.multi_node_env if layout.nodes != 1 else {}),
        **controller.environment(request.script, layout.gpus_per_node),
        **request.env,
    }
    if request.hang_after:  # every Python process of the step loads the stack watcher
        env.update(hang.watcher_env(hang.watch_folder(), env, os.environ.get("PYTHONPATH")))
    if request.until_done:  # the contract the ranks read: checkpoint on this signal
        env.update({CHECKPOINT_SIGNAL: "USR1", CHECKPOINT_GRACE: str(grace_of(site, request))})
    signature = resolve_signature(site, request, image, runtime)
    return Launch(
        site=site,
        request=request,
        mode=mode,
        runtime=runtime,
        controller=controller,
        layout=layout,
        scheduled=scheduled,
        image=pinned_image(image, signature, runtime),  # a signed registry image: its digest
        image_origin=origin,
        image_unreadable=unreadable,
        facts=facts,
        signature=signature,
        env=env,
        binds=binds,
        mpi=mpi,
        cpus_per_task=cpus,
        memory=memory,
        dry_run=dry_run,
        judged_here=keep_going or (not dry_run and mode != "batch"),
        machine=machine,
    )


def rank_cpus(
    site: Site, request: LaunchRequest, layout: Layout, partition: str | None
) -> int | None:
    """A rank's CPUs: -c as given; inside an allocation none (the step says only what it was
    told); else the site's default, lowered where a node's ranks would ask for more cores
    than the site allows for the GPUs asked for there (ZIH: 8 ranks x 6 > 46 for 8 GPUs)."""
    if request.cpus_per_task or request.inside_allocation:
        return request.cpus_per_task
    default, ranks = site.scheduler.cpus_per_task, layout.node_ranks
    cap, _key = site.scheduler.cpu_cap(partition, layout.gpus_per_node)
    if default and ranks and cap and default * ranks > cap:
        return max(cap // ranks, 1)
    return default


def compose(launch: Launch, results: list[Result], *, salloc: bool, prepare_only: bool) -> Plan:
    """The commands of a judged launch: the runtime prepared (`prepare_only`: nothing made),
    the srun step, and outside an allocation the batch script and what submits it."""
    site, request, layout, mpi = launch.site, launch.request, launch.layout, launch.mpi
    runtime, controller = launch.runtime, launch.controller
    prepared = runtime.prepare(launch, dry_run=prepare_only)
    env = runtime.environment({**launch.env, **prepared.env})
    invocation = Invocation(
        image=prepared.image if runtime.runs_image else None,
        program=controller.program(
            runtime.profile.python, prepared.script or request.script, request.args
        ),
        gpu=runtime.profile.gpu and layout.gpus_per_node > 0,
        flags=prepared.flags,
        modules=runtime.modules(launch),
        binds=_binds(launch, prepared.binds),
        workdir=prepared.workdir or request.workdir,
        env_names=[*env, *(n for n in controller.task_env if n not in env)],
    )
    wrapped = runtime.wrap(invocation)

    sched = site.scheduler
    # one rank that dies ends the step: its peers would otherwise wait in an allreduce (or in
    # hvd.init()) until the time limit
    kill = [] if _says_kill_on_bad_exit(sched.srun_options) else ["--kill-on-bad-exit=1"]
    kill = [] if _says_kill_on_bad_exit(request.srun_options) else kill
    head = [
        "srun", *([f"--mpi={mpi}"] if mpi else []), *kill, *sched.srun_options,
        *request.srun_options,
    ]  # fmt: skip
    tasks = ([f"--job-name={layout.job_name}"] if layout.job_name else []) + layout_options(layout)
    gpus = gpu_flags(sched.gpu_request, layout.gpus_per_node)
    bind_none = ["--gpu-bind=none"] if layout.gpu_bind_none and layout.gpus_per_node else []
    container = [*wrapped.srun_flags, *controller.wrap_task(launch, wrapped.argv)]
    # inside an allocation the step inherits GPUs unless they were asked for; CPUs it does not:
    # srun no longer reads SLURM_CPUS_PER_TASK (Slurm 22.05), so every step says its -c
    cpus = layout.task_cpus(launch.cpus_per_task)
    cpu_opts = [f"--cpus-per-task={cpus}"] if cpus else []
    mem_opts = [launch.memory.option] if launch.memory else []
    step_gpus = gpus if layout.gpu_bind_none or request.gpus_per_node is not None else []
    step = controller.wrap_step(
        launch,
        [*head, *tasks, *step_gpus, *bind_none, *cpu_opts,
         *(mem_opts if request.inside_allocation else []), *container],
    )  # fmt: skip
    staged: StagedImage | None = None
    if request.stage:
        # a batch script stages first and names the copy on its srun line; a step run from
        # here (inside an allocation) is wrapped in the program that stages and runs it
        image_word, at = stage_point(launch, invocation.image, step)
        staged = StagedImage(stage_command(launch, image_word), image_word, at)
        unstaged, step = step, staged_step(launch, invocation.image, step)
    notes = [f"controller {controller.name}: {controller.why}"] if controller.guessed else []
    if request.inside_allocation and request.sbatch_options:
        notes.append(
            f"--sbatch-option {' '.join(request.sbatch_options)}: not used inside an "
            "allocation (the job has its resources): give it to the salloc or sbatch "
            "that made the allocation"
        )
    files = dict(prepared.files)
    if request.hang_after:  # the watcher the stacks come from, where PYTHONPATH names it
        # named only where nothing is made (a dry run) or the batch script writes it itself
        named = prepare_only or launch.mode == "batch"
        watcher = hang.watcher_files(hang.watch_folder()) if named else hang.write_watcher()
        files.update(watcher)
    notes += prepared.notes
    folders = list(prepared.folders)
    done = dict(
        launch=launch, image=invocation.image, env=env, results=results, notes=notes,
        files=files, folders=folders,
    )  # fmt: skip
    if request.inside_allocation:
        return Plan(argv=step, allocation=[], step=step, script=None, **done)  # type: ignore[arg-type]

    until = until_done(launch)
    if request.screen or until is not None:
        # the job screens its nodes first, or restarts its step: this tool runs in it and does
        # what `run --screen` or `run --max-restarts` does inside an allocation (its own steps,
        # their files, the step on the good nodes)
        step, files, env, folders = job_step(site, request, until), {}, {}, []
        done.update(files=files, env=env, folders=folders)
        staged = None  # the tool stages in the job, as `run --stage` does inside an allocation
    if until is not None and until.how == "program":
        # Lightning runs `scontrol requeue` from rank 0, inside the container: where that fails
        # it trains on, and the job script ends the step and goes on itself
        notes.append(
            f"--until-done: controller {controller.name} requeues its own job on Slurm's warning "
            "with `scontrol requeue` from rank 0, inside the container (look for 'Requeued SLURM "
            "job' in the log); where the image has no scontrol or Slurm configuration, the job "
            "script goes on in a job of its own once the checkpoint time is over"
            + (
                ""
                if sched.requeue
                else f"; site {site.name} is not known to allow requeue (scheduler.requeue)"
            )
        )
    resources = allocation_options(launch, controller.application(launch.facts))
    job_name = layout.job_name or request.job_name or stem(request.script)
    allocation = [
        f"--job-name={job_name}",
        *allocation_tasks(with_spares(layout, request.spare_nodes), sched.ranks_per_node_as),
        *gpus, *cpu_opts, *mem_opts, *resources,
        # a node the screen finds down, or one lost mid-run, must not end the job: its steps
        # run without it
        *(["--no-kill"] if request.screen or until is not None else []),
    ]  # fmt: skip
    script = script_text(
        BatchScript(
            options=[
                *allocation,
                f"--output={request.job_output or OUTPUT_PATTERN}",
                f"--error={request.job_error or ERROR_PATTERN}",
                # Slurm's default requeues a batch job whose node fails and runs it again from
                # the start, its log truncated; a requeue is asked for (and then keeps the log)
                *requeue_options(request, until),
                *runtime.sbatch_options(invocation.image, invocation.modules),
                *sched.sbatch_options,
                *request.sbatch_options,
            ],
            site=site.name,
            runtime=runtime.kind,
            controller=f"{controller.name} ({controller.why})",
            option_notes=(
                {launch.memory.option: launch.memory.why}
                if launch.memory and launch.memory.why
                else {}
            ),
            modules=site.modules,
            env=env,
            step=unstaged if staged is not None else step,
            files=files,
            folders=folders,
            until_done=until,
            staged=staged,
            pinned=_pinned(launch),
        )
    )
    if salloc:
        extra = [
            o for o in (*sched.sbatch_options, *request.sbatch_options)
            if not o.startswith(_NOT_FOR_SALLOC)
        ]  # fmt: skip
        argv, how = ["salloc", *allocation, *extra, *step], "salloc"
    else:  # the job's folder is the one it was planned in (relative paths, its output)
        argv, how = slurm.sbatch_argv(runtimes.working_directory()), "sbatch"
    return Plan(argv=argv, allocation=allocation, step=step, script=script, how=how, **done)  # type: ignore[arg-type]


def _pinned(launch: Launch) -> PinnedImage | None:
    found = launch.signature
    if found is None or found.registry or found.path is None or found.digest is None:
        return None  # a registry image is pinned by naming its digest (the check says so)
    return PinnedImage(found.path, found.digest)


def job_step(site: Site, request: LaunchRequest, until: UntilDone | None) -> list[str]:
    """The line of a batch job that screens its nodes or restarts its step: this tool's `run
    --screen` or `run --max-restarts`, run by the Python it runs in now (the job's nodes see
    the same file system as this one, as they see the image), with the options that make this
    request again. A job that goes on past its time limit hands its ranks the contract they
    read (HVD_CHECKPOINT_SIGNAL, HVD_CHECKPOINT_GRACE) as --env values."""
    inner = replace(request, sbatch_options=[])  # #SBATCH lines here
    if until is not None:
        contract = {CHECKPOINT_SIGNAL: "USR1", CHECKPOINT_GRACE: str(until.grace)}
        inner = replace(
            inner, until_done=False, grace=None, max_restarts=until.max_restarts,
            env={**request.env, **contract},
        )  # fmt: skip
    options = run_options(inner, site_ref(site))
    return [sys.executable, "-m", "hvd_container", "run", *options, "--", request.script,
            *request.args]  # fmt: skip


def _says_kill_on_bad_exit(options: list[str]) -> bool:
    """Whether a site's srun options choose --kill-on-bad-exit themselves (-K, -K0, ...)."""
    return any(o.startswith(("-K", "--kill-on-bad-exit")) for o in options)


def allocation_options(launch: Launch, application: str | None = None) -> list[str]:
    """Options that ask Slurm for resources by name: on salloc, or as #SBATCH. The values are
    the launch's, resolved once (launch.scheduled), the ones the checks judged.
    `application`: what the launch runs (pytorch, ...), for a site's accounting comment."""
    values, comment = launch.scheduled, launch.site.scheduler.comment
    opts: list[str] = []
    for flag, value in (
        ("--partition", values.partition),
        ("--account", values.account),
        ("--qos", values.qos),
        ("--constraint", values.constraint),
        ("--comment", comment.compose(launch.request.comment, application)),
        ("--time", values.time),
    ):
        if value:
            opts.append(f"{flag}={value}")
    return opts


def until_done(launch: Launch) -> UntilDone | None:
    """How an --until-done job goes on past its time limit: the program's own requeue
    (Lightning), the site's requeue, else a job that depends on this one."""
    request, site = launch.request, launch.site
    if not request.until_done:
        return None
    how: Literal["requeue", "dependency", "program"] = (
        "program" if launch.controller.requeues_on_signal
        else "requeue" if site.scheduler.requeue else "dependency"
    )  # fmt: skip
    restarts = request.max_restarts
    return UntilDone(
        grace=grace_of(site, request),
        max_restarts=DEFAULT_MAX_RESTARTS if restarts is None else restarts,
        how=how,
    )


def requeue_options(request: LaunchRequest, until: UntilDone | None) -> list[str]:
    """Slurm's default requeues a batch job whose node fails and runs it again from the start,
    its log truncated; a requeue is asked for (and then keeps the log), or a job that goes on
    in segments asks for what its segments need."""
    if until is not None:
        options = until_done_options(until)
        return ["--requeue" if o == "--no-requeue" and request.requeue else o for o in options]
    return ["--requeue", "--open-mode=append"] if request.requeue else ["--no-requeue"]


def parsed_binds(site: Site, request: LaunchRequest) -> tuple[Bind, ...]:
    """The site's binds, then --bind's, each SRC:DST[:OPT] read once (a bad one: UserError)."""
    out = []
    for what, binds in ((f"{site.source}: binds", site.binds), ("--bind", request.binds)):
        for bind in (one for item in binds for one in split_binds(item)):
            if what != "--bind":  # `sites validate` takes ~ and $VAR there: the same rule
                try:
                    bind = expand(bind, os.environ)
                except ValueError as exc:
                    raise UserError(f"{what}: {exc}") from None
            parsed = parse_bind(bind)
            if isinstance(parsed, str):
                raise UserError(f"{what}: {parsed}")
            out.append(parsed)
    return tuple(out)


def _binds(launch: Launch, prepared: list[str]) -> list[str]:
    """The launch's binds, then the runtime's own (the working directory)."""
    own = []
    for bind in prepared:
        parsed = parse_bind(bind)
        if isinstance(parsed, str):  # the runtime's own code made it: a bug, said plainly
            raise UserError(f"the working directory: {parsed}")
        own.append(parsed)
    return [str(b) for b in (*launch.binds, *own)]
