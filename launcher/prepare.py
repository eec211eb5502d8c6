"""One preparation for every way a launch leaves hvd-container.

`run --dry-run`, `batch` (stdout or -o), `batch --submit`, `run` (srun inside an allocation,
sbatch or salloc outside one) and `jupyter` all compose their srun line from what
`prepare_launch` returns, so the line a dry run prints is the line a run executes.

Always (pure, fast, no Slurm needed): the image named by --image or by the site's
images.template for --recipe, the build facts read from that image's file (arch, MPI, Horovod
controllers: checked during composition), the Gloo wrapper and `--mpi=none` for
`--controller gloo` with its layout check, and for Charliecloud the binds of the working
directory and the script's directory, $USER and the directory ch-run will run.

Side effects only where the mode needs them:
- "show" (dry run): nothing is written, run or asked. A local SIF's unpacked cache directory
  is computed from the SIF header; a missing image file is a warning (the line may be meant
  for another machine).
- "write" (a batch script): as "show", but a local image is unpacked so the script runs as
  written.
- "launch": as "write", plus `srun --mpi=list` and the local Docker engine's labels; a missing
  image file is an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from hvd_container.launcher import preflight
from hvd_container.launcher.binds import dest_of, source_of, split_binds
from hvd_container.launcher.compose import resolve_image
from hvd_container.launcher.request import LaunchRequest, check, program_path
from hvd_container.launcher.sites import Runtime, Site

from hvd_container.core.errors import UserError

Mode = Literal["show", "write", "launch"]


@dataclass(frozen=True)
class PreparedLaunch:
    """A site and request ready for `plan_launch`/`render_batch_plan`, and the warnings."""

    site: Site
    request: LaunchRequest
    warnings: list[str]


def working_directory() -> str:
    """The current directory, or a one-line error when it was deleted under us."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise UserError(
            "the current directory no longer exists: cd to an existing directory and run again"
        ) from None


def _origin(site: Site, request: LaunchRequest) -> str:
    if request.image:
        return "--image"
    return f"image of recipe {request.recipe} (site {site.name}'s images.template)"


def prepare_launch(site: Site, request: LaunchRequest, mode: Mode) -> PreparedLaunch:
    """The site and request every launch path composes from; raises UserError with the fix."""
    check(site, request)
    runtime = site.runtime_for(request.runtime)
    warnings: list[str] = []
    image = resolve_image(site, request, runtime.kind) if runtime.kind != "none" else None
    problem = preflight.missing_image(image, runtime.kind, _origin(site, request))
    if problem:
        if mode == "launch" or (mode == "write" and runtime.kind == "charliecloud"):
            raise UserError(problem)
        warnings.append(f"{problem}; a launch on this machine would refuse it")
    request = preflight.with_image_facts(
        request, None if problem else image, ask_docker=mode == "launch"
    )
    if image is not None:
        request = replace(request, image=image)
    if mode == "launch" and request.controller == "mpi":
        preflight.check_mpi_plugin(request.mpi or site.mpi, preflight.srun_mpi_plugins())
    warnings += preflight.gpu_warnings(request.facts, request.gpus_per_node or 0)
    if runtime.kind == "charliecloud":
        site, request, skipped = _charliecloud(
            site, runtime, request, mode, image_ready=not problem
        )
        warnings += skipped
    elif runtime.kind == "podman-hpc":
        from hvd_container.launcher.slurm import current_user

        # podman-hpc takes the user from a login terminal, else $USER: a batch job has neither
        env = {**request.env, "USER": request.env.get("USER") or current_user()}
        request = replace(_with_workdir(request), env=env)
    if request.controller == "gloo":
        request = _gloo(runtime, request)
    return PreparedLaunch(site, request, warnings)


def _with_flags(site: Site, runtime: Runtime, flags: list[str]) -> Site:
    """The site with `flags` added to the runtime the launch uses."""
    new_runtime = replace(runtime, flags=[*runtime.flags, *flags])
    if runtime is site.runtime:
        return replace(site, runtime=new_runtime)
    if any(r is runtime for r in site.other_runtimes):
        others = [new_runtime if r is runtime else r for r in site.other_runtimes]
        return replace(site, other_runtimes=others)
    # a runtime kind the profile does not configure: it becomes one of its own
    return replace(site, other_runtimes=[*site.other_runtimes, new_runtime])


def _charliecloud(
    site: Site, runtime: Runtime, request: LaunchRequest, mode: Mode, *, image_ready: bool
) -> tuple[Site, LaunchRequest, list[str]]:
    """ch-run needs $USER, the working and script directories bound, and a directory image;
    also returns the image's environment lines that could not be passed on."""
    from hvd_container.launcher import charliecloud_cache
    from hvd_container.launcher.slurm import current_user

    env = dict(request.env)
    env.setdefault("USER", current_user())  # ch-run refuses to start without $USER
    request = _with_workdir(request)
    binds = request.binds
    image = request.image
    skipped: list[str] = []
    if image and image_ready:
        if mode == "show":
            prepared = charliecloud_cache.planned(image, site.images.cache_dir)
        else:
            dests = [dest_of(b) for b in binds]
            prepared = charliecloud_cache.prepare(
                image, mount_points=dests, site_dir=site.images.cache_dir
            )
            skipped = list(prepared.warnings)
        site = _with_flags(site, runtime, prepared.ch_run_flags())
        image = str(prepared.root)
    request = replace(request, image=image, env=env)
    return site, request, skipped


def _with_workdir(request: LaunchRequest) -> LaunchRequest:
    """The working directory (and a script's folder outside it) bound at the same path and
    made the working directory: runtimes that mount nothing on their own (ch-run,
    podman-hpc) would otherwise start in / without the user's files."""
    cwd = working_directory()
    binds = [one for item in request.binds for one in split_binds(item)]
    wanted = [cwd]
    script = Path(request.script)
    if script.suffix == ".py" and script.is_file():
        # a script outside the working directory must be visible in the container too
        parent = str(script.resolve().parent)
        if not (parent + "/").startswith(cwd.rstrip("/") + "/"):
            wanted.append(parent)
            request = replace(request, script=str(script.resolve()))
    for path in wanted:
        if not any(source_of(b) == path for b in binds):
            binds.append(f"{path}:{path}")
    return replace(request, workdir=request.workdir or cwd, binds=binds)


def _gloo(runtime: Runtime, request: LaunchRequest) -> LaunchRequest:
    """Every rank runs the script under the Gloo wrapper; srun starts no MPI."""
    from hvd_container.launcher import gloo

    problem = gloo.check_layout(request.ntasks, request.nodes, request.ntasks_per_node)
    if problem:
        raise UserError(problem)
    lightning = request.lightning
    if lightning is None:
        from hvd_container.launcher.lightning import lightning_script

        lightning = lightning_script(request.script, request.facts)[0]
    if request.script.endswith(".py"):
        script, args = gloo.wrap_program(runtime.python, program_path(request.script), request.args)
        name = request.job_name or Path(request.script).stem
        request = replace(request, script=script, args=args, lightning=lightning, job_name=name)
    return replace(request, mpi=request.mpi or "none")
