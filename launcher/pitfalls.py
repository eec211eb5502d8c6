"""Launch mistakes that can be caught before a job is queued, each with its fix.

Every check is a pure function returning findings; `launcher.compose` runs them and turns the
first error into a one-line UserError and the warnings into messages for stderr.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from hvd_container.launcher.facts import ImageFacts
from hvd_container.launcher.sites import Runtime, Site

from hvd_container.core.errors import UserError

LIGHTNING_BAD_JOB_NAMES = ("bash", "interactive")


@dataclass(frozen=True)
class Finding:
    """A pitfall found in a launch: refused (error) or reported (warning), with the fix."""

    level: Literal["error", "warning"]
    code: str
    message: str


def apply(findings: list[Finding], warnings: list[str]) -> None:
    """Raise the first error as a one-line UserError; collect the warnings' messages."""
    for finding in findings:
        if finding.level == "error":
            raise UserError(finding.message)
    warnings.extend(f.message for f in findings)


@dataclass
class Checks:
    """The named checks of one launch and what each found. A launch (`keep_going` false)
    stops at the first error; `hvd-container doctor` keeps going and reports every check."""

    warnings: list[str]
    keep_going: bool = False
    results: list[tuple[str, list[Finding]]] = field(default_factory=list)

    def run(self, name: str, findings: list[Finding]) -> None:
        self.results.append((name, findings))
        if self.keep_going:
            self.warnings.extend(f.message for f in findings if f.level == "warning")
        else:
            apply(findings, self.warnings)


def error(code: str, message: str) -> Finding:
    return Finding("error", code, message)


def warning(code: str, message: str) -> Finding:
    return Finding("warning", code, message)


def mandatory_comment(site: Site, comment: str | None, needs_allocation: bool) -> list[Finding]:
    """Neuron rejects jobs without --comment=<application>."""
    rule = site.scheduler.comment
    allowed = ", ".join(rule.allowed)
    if comment is None:
        if rule.required and needs_allocation:
            hint = f" (allowed: {allowed})" if allowed else ""
            return [
                error(
                    "comment-missing",
                    f"site {site.name} requires --comment=<application>{hint}: pass e.g. --comment {rule.allowed[0] if rule.allowed else 'python'}",
                )
            ]
        return []
    if rule.allowed and comment not in rule.allowed:
        return [
            warning(
                "comment-unofficial",
                f"--comment {comment!r} is not in site {site.name}'s list (allowed: {allowed}); use one of them, e.g. --comment pytorch",
            )
        ]
    return []


def account_suffix(site: Site, account: str | None, needs_allocation: bool) -> list[Finding]:
    """Perlmutter GPU jobs are charged to <project>_g; other accounts are refused or wrong."""
    suffix = site.scheduler.account_suffix
    if not suffix or not needs_allocation:
        return []
    if account is None:
        return [
            warning(
                "account-missing",
                f"no --account: Slurm charges your default project, but GPU jobs on site {site.name} need <project>{suffix}; pass e.g. --account m1234{suffix}",
            )
        ]
    if not account.endswith(suffix):
        return [
            warning(
                "account-suffix",
                f"--account {account}: GPU jobs on site {site.name} are charged to <project>{suffix}; use --account {account}{suffix}",
            )
        ]
    return []


def lightning_layout(
    script: str, ntasks: int | None, ntasks_per_node: int | None, gpus_per_node: int
) -> list[Finding]:
    """Lightning refuses `srun -n N`: it wants -N and --ntasks-per-node."""
    if ntasks is None:
        return []
    per_node = ntasks_per_node or (min(ntasks, gpus_per_node) if gpus_per_node else ntasks)
    nodes = math.ceil(ntasks / per_node)
    return [
        error(
            "lightning-ntasks",
            f"{script} uses PyTorch Lightning, which refuses srun -n/--ntasks: use -N {nodes} --ntasks-per-node {per_node} instead of -n {ntasks}",
        )
    ]


def lightning_job_name(script: str, job_name: str | None) -> list[Finding]:
    """Lightning ignores Slurm when the job is named bash or interactive."""
    if job_name in LIGHTNING_BAD_JOB_NAMES:
        return [
            error(
                "lightning-job-name",
                f"{script} uses PyTorch Lightning, which ignores Slurm in a job named {job_name!r}: pass another --job-name",
            )
        ]
    return []


def gpus_per_task(value: int | None, style: str) -> list[Finding]:
    """--gpus-per-task hides all GPUs but one from each rank (set_device(local_rank) fails)."""
    if value is None:
        return []
    flag = "--gres=gpu:N" if style == "gres" else "--gpus-per-node=N"
    return [
        warning(
            "gpus-per-task",
            f"--gpus-per-task makes every rank see only GPU 0 (set_device(local_rank) fails, no P2P): requesting {flag} with --gpu-bind=none instead; pass --gpus-per-node to silence this",
        )
    ]


def shifter_modules(runtime: Runtime, extra: list[str]) -> tuple[list[str], list[Finding]]:
    """One comma-joined --module; duplicates dropped with a warning."""
    merged: list[str] = []
    repeated: list[str] = []
    for name in [*runtime.modules, *extra]:
        if name in merged:
            repeated.append(name)
        else:
            merged.append(name)
    if runtime.kind != "shifter":
        if extra:
            return merged, [
                error(
                    "modules-not-shifter",
                    f"--module is a shifter option; runtime {runtime.kind} has no modules (allowed with: shifter)",
                )
            ]
        return merged, []
    if repeated:
        return merged, [
            warning(
                "shifter-module-repeated",
                f"shifter module(s) {', '.join(repeated)} given twice: a second --module replaces the first, so they are joined once: --module={','.join(merged)}",
            )
        ]
    return merged, []


def runtime_gpu(site: Site, runtime: Runtime, modules: list[str], gpus: int) -> list[Finding]:
    """A runtime that leaves the container without the GPUs the job asks for (typically a
    --runtime the site profile does not configure)."""
    if gpus <= 0:
        return []
    kind = runtime.kind
    if kind == "shifter" and "gpu" not in modules:
        lost = "shifter gets no --module=gpu, so the container has no GPU driver or devices"
        fix = f"pass --module gpu, or add a shifter runtime with modules: [gpu] to site {site.name}'s profile"
    elif kind == "charliecloud":
        lost = "ch-run has no GPU option, so the container lacks the host's NVIDIA driver libraries"
        fix = "inject them with `ch-fromhost --nvidia IMAGE`, or pick --runtime apptainer"
    elif kind in ("apptainer", "singularity", "podman-hpc") and not runtime.gpu:
        flag = "--gpu" if kind == "podman-hpc" else "--nv"
        lost = f"{kind} runs without {flag} (gpu: false for it in site {site.name}'s profile)"
        fix = f"set gpu: true for the {kind} runtime in the profile"
    else:
        return []
    return [
        warning(
            "runtime-no-gpu",
            f"runtime {kind}: the job asks for {gpus} GPUs per node but {lost}; {fix}",
        )
    ]


def image_arch(site: Site, partition: str | None, facts: ImageFacts | None) -> list[Finding]:
    """An x86 image does not run on ppc64le nodes (ZIH ml), and so on."""
    if facts is None or facts.arch is None:
        return []
    site_arch = site.arch_for(partition)
    if facts.arch == site_arch:
        return []
    info = site.scheduler.partition_info(partition)
    own_arch = info is not None and info.arch is not None and info.arch != site.arch
    where = f"partition {partition} of site {site.name}" if own_arch else f"site {site.name}"
    return [
        error(
            "arch-mismatch",
            f"{facts.source} is built for {facts.arch} but {where} runs {site_arch}: build it with `arch: {site_arch}` in the recipe, or pick a site with {facts.arch} nodes",
        )
    ]


def mpi_plugin(
    mpi: str | None, controller: str, facts: ImageFacts | None, runtime_kind: str
) -> list[Finding]:
    """srun's --mpi plugin must be one the image's MPI was built for; MPI must exist at all.

    Only for Horovod images: without Horovod (a Lightning image, say) ranks find each other
    through Slurm's variables, not through MPI.
    """
    if facts is None or facts.mpi_pmi is None or facts.controllers is None or controller != "mpi":
        return []
    if facts.mpi_pmi == ():
        gloo = facts.controllers is not None and "gloo" in facts.controllers
        fix = "pass --controller gloo" if gloo else "add `mpi:` to the recipe and rebuild"
        return [
            error(
                "no-mpi",
                f"{facts.source} has no MPI: under srun every rank would be an independent size-1 Horovod job; {fix}",
            )
        ]
    if facts.controllers is not None and "mpi" not in facts.controllers:
        return [
            error(
                "no-mpi-controller",
                f"{facts.source} builds Horovod without the MPI controller: pass --controller gloo",
            )
        ]
    if mpi is None or runtime_kind == "none":
        return []
    family = "pmix" if mpi.startswith("pmix") else mpi
    if family not in facts.mpi_pmi:
        wanted = ", ".join(facts.mpi_pmi)
        return [
            error(
                "pmi-mismatch",
                f"srun --mpi={mpi} does not match the image's MPI ({facts.source} speaks {wanted}): ranks would each be 'rank 0 of 1'; pass --mpi {facts.mpi_pmi[0]}",
            )
        ]
    return []


def cleanenv(runtime: Runtime) -> list[Finding]:
    """Apptainer --cleanenv drops SLURM_*/PMI_*/PMIX_* and so breaks rank discovery."""
    if runtime.kind in ("apptainer", "singularity") and any(
        f in ("--cleanenv", "-e", "--containall", "-C") for f in runtime.flags
    ):
        return [
            error(
                "cleanenv",
                f"runtime.flags: {runtime.kind} --cleanenv/--containall drops SLURM_*, PMI_* and PMIX_*, so ranks cannot find each other: remove it and pass variables with --env",
            )
        ]
    return []


def image_ignored(runtime_kind: str, image: str | None) -> list[Finding]:
    if runtime_kind == "none" and image:
        return [
            warning(
                "image-ignored",
                f"runtime none runs on the host: --image {image} is ignored (pick a container runtime with --runtime)",
            )
        ]
    return []


def registry_image_per_rank(runtime_kind: str, image: str | None, ranks: int) -> list[Finding]:
    """Apptainer/Singularity given a registry image converts it to a SIF in every rank, all at
    the same time (each pulls every layer and builds its own SIF): convert it once first."""
    from hvd_container.launcher.runtimes import apptainer, is_file_ref

    if runtime_kind not in ("apptainer", "singularity") or not image or ranks <= 1:
        return []
    if is_file_ref(image):
        return []
    ref = apptainer.image_ref(image)
    return [
        error(
            "registry-image-per-rank",
            f"{runtime_kind} would convert {ref} into a SIF in each of the {ranks} ranks at "
            f"once: convert it once first (`{runtime_kind} pull image.sif {ref}` on the login "
            "node, or `hvd-container convert IMAGE --to sif -o image.sif`) and pass --image "
            "image.sif",
        )
    ]


def recipe_image_without_registry(
    site: Site, runtime_kind: str, recipe: str | None, ref: str | None
) -> list[Finding]:
    """--recipe on a site that pulls from a registry needs the site's images.registry: without
    it the recipe's NAME:VERSION means docker.io/library/NAME, where no build was pushed."""
    from hvd_container.launcher.runtimes import is_file_ref

    if recipe is None or ref is None or site.images.registry or runtime_kind == "none":
        return []
    repository = ref.rsplit("@", 1)[0].rsplit(":", 1)[0] if "/" not in ref else ref
    if is_file_ref(ref) or "/" in repository or "://" in ref:
        return []
    return [
        error(
            "recipe-image-without-registry",
            f"--recipe: site {site.name} has no images.registry, so the image would be "
            f"docker.io/library/{ref}, where `hvd-container push` never puts it: pass --image "
            "REGISTRY/NAME:TAG (what push printed), or set images.registry in the site profile",
        )
    ]


def nccl_interface(
    site: Site, env: dict[str, str], nodes: int | None, gpus_per_node: int
) -> list[Finding]:
    """Across nodes NCCL may bootstrap over the wrong interface (docker0, lo) unless told."""
    if (nodes or 1) < 2 or gpus_per_node <= 0 or "NCCL_SOCKET_IFNAME" in env:
        return []
    return [
        warning(
            "nccl-socket-ifname",
            f"site {site.name} sets no NCCL_SOCKET_IFNAME for this {nodes}-node GPU launch: NCCL may pick the wrong interface (docker0, lo); add `NCCL_SOCKET_IFNAME: <interface>` (e.g. ib0, hsn) to the site profile's env, or pass -e NCCL_SOCKET_IFNAME=<interface>",
        )
    ]


def controller_built(controller: str, facts: ImageFacts | None) -> list[Finding]:
    """--controller gloo on an image whose Horovod has no Gloo (MPI is mpi_plugin's)."""
    if facts is None or facts.controllers is None or controller != "gloo":
        return []
    if "gloo" in facts.controllers:
        return []
    return [
        error(
            "no-gloo-controller",
            f"{facts.source} builds Horovod without the Gloo controller (it has {', '.join(facts.controllers) or 'none'}): pass --controller mpi, or add gloo to horovod.controllers and rebuild",
        )
    ]


# The MPI library a site's runtime swaps in for the image's: Cray MPICH, ABI libmpi.so.12.
def host_mpi_injected(runtime: Runtime, modules: list[str]) -> bool:
    if runtime.kind == "shifter":
        return "mpich" in modules
    return runtime.kind == "podman-hpc" and "--mpi" in runtime.flags


# What each MPI family's library is called inside an image (Debian/Ubuntu packages).
MPI_SONAMES = {"openmpi": "libmpi.so.40", "mpich": "libmpich.so.12"}


def mpi_abi(runtime: Runtime, modules: list[str], facts: ImageFacts | None) -> list[Finding]:
    """The host MPI the runtime injects replaces libmpi.so.12 (MPICH ABI) only: an Open MPI
    image keeps its own MPI, which then runs over TCP instead of the site's network."""
    if facts is None or not facts.mpi_family or not host_mpi_injected(runtime, modules):
        return []
    if facts.mpi_family == "mpich":
        return []
    soname = MPI_SONAMES.get(facts.mpi_family, "its own library")
    return [
        warning(
            "mpi-abi",
            f"{runtime.kind} injects the site's Cray MPICH, which replaces an image's libmpi.so.12 (MPICH ABI) only; {facts.source} has {facts.mpi_family} ({soname}), so its ranks use the image's own MPI over TCP: build the image with PyPI's MPICH (mpi: {{flavor: mpich, source: pip}}, libmpi.so.12), or use --controller gloo",
        )
    ]


# The oldest driver each CUDA major runs on (CUDA's minor-version compatibility: any driver of
# the major's first release runs every minor of it). NVIDIA's CUDA compatibility table.
CUDA_MIN_DRIVER = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}


def driver_at_least(driver: str, needed: str) -> bool:
    """Whether driver (as precise as known: "580" or "580.65.06") reaches needed."""
    have, want = _numbers(driver), _numbers(needed)
    return have >= want[: len(have)]


def _numbers(version: str) -> tuple[int, ...]:
    """ "550.127.05" -> (550, 127, 5); what is not a number ends it."""
    out: list[int] = []
    for part in version.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def cuda_driver(
    facts: ImageFacts | None, gpus: int, driver: str | None, where: str
) -> list[Finding]:
    """An image's CUDA needs a driver at least as new as its major's first release."""
    if facts is None or not facts.cuda or gpus <= 0 or driver is None:
        return []
    major = facts.cuda.split(".")[0]
    needed = CUDA_MIN_DRIVER.get(major)
    if needed is None or driver_at_least(driver, needed):
        return []
    fits = [m for m, d in CUDA_MIN_DRIVER.items() if driver_at_least(driver, d)]
    fix = f"build the image for CUDA {fits[-1]}" if fits else "ask the site for a newer driver"
    return [
        error(
            "cuda-driver",
            f"{facts.source} is built for CUDA {facts.cuda}, which needs NVIDIA driver >= {needed}; {where} has {driver}: {fix}",
        )
    ]


def injected_glibc(runtime: Runtime, facts: ImageFacts | None) -> list[Finding]:
    """Libraries a runtime injects (Cray MPICH, the GPU driver's) need the glibc they were
    built against: an older one in the image fails at load time ("GLIBC_2.xx not found")."""
    if facts is None or not facts.glibc or runtime.injects_glibc is None:
        return []
    if _numbers(facts.glibc)[:2] >= _numbers(runtime.injects_glibc):
        return []
    return [
        error(
            "glibc-too-old",
            f"{facts.source} has glibc {facts.glibc}, but the libraries {runtime.kind} injects need glibc >= {runtime.injects_glibc}: they fail to load (GLIBC_{runtime.injects_glibc} not found); rebuild on a newer base (Debian 11+, Ubuntu 20.04+)",
        )
    ]


def gpu_tensor_operations(facts: ImageFacts | None, gpus: int) -> list[Finding]:
    """A GPU launch of an image whose Horovod has no NCCL: GPU tensors are reduced through
    host memory by MPI or Gloo, far slower (check-build's facts, recorded at build)."""
    if facts is None or facts.tensor_ops is None or gpus <= 0 or not facts.gpu:
        return []
    if "nccl" in facts.tensor_ops:
        return []
    return [
        warning(
            "no-nccl",
            f"{facts.source} has Horovod without NCCL (tensor operations: {', '.join(facts.tensor_ops) or 'none'}): GPU tensors are reduced through host memory; build with horovod.gpu_operations: nccl",
        )
    ]


def gpu_image_without_gpus(facts: ImageFacts | None, gpus: int, nodes: int | None) -> list[Finding]:
    """A CUDA image launched without GPUs runs Horovod on the CPU (NCCL unused)."""
    if facts is None or not facts.gpu or gpus > 0:
        return []
    return [
        warning(
            "gpu-image-no-gpus",
            f"{facts.source} is a CUDA image but the job asks for no GPUs: it runs on the CPU and NCCL stays unused; pass --gpus-per-node N",
        )
    ]


def nccl_network(
    site: Site,
    runtime: Runtime,
    modules: list[str],
    env: dict[str, str],
    nodes: int | None,
    gpus: int,
) -> list[Finding]:
    """Across nodes, NCCL without its network plugin falls back to TCP without a word; a
    forced NCCL_NET makes a missing plugin fail at start instead."""
    if (nodes or 1) < 2 or gpus <= 0:
        return []
    if "NCCL_NET" not in env:
        return [
            warning(
                "nccl-net-unforced",
                f"site {site.name} sets no NCCL_NET for this {nodes}-node GPU launch: if NCCL's network plugin is missing it falls back to TCP without a word; set NCCL_NET (e.g. 'AWS Libfabric' on Slingshot, IB on InfiniBand) in the profile's env or with -e, so a missing plugin fails at start",
            )
        ]
    if runtime.kind == "shifter" and not any("nccl" in m for m in modules):
        return [
            error(
                "nccl-plugin-missing",
                f"NCCL_NET={env['NCCL_NET']} is forced but shifter gets no nccl module, so the plugin is absent and NCCL fails at start: add the site's NCCL module to --module (e.g. nccl-plugin)",
            )
        ]
    return []


# Places that are each node's own on clusters (the login node's /tmp is not the compute node's).
NODE_LOCAL = ("/tmp", "/var/tmp", "/dev/shm", "/run")


def _under(path: str, roots: list[str] | tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def image_location(site: Site, image_path: str | None) -> list[Finding]:
    """A file image must be where the compute nodes see it (a shared file system)."""
    if image_path is None:
        return []
    if site.shared_paths:
        if _under(image_path, site.shared_paths):
            return []
        return [
            error(
                "image-not-shared",
                f"image {image_path} is outside site {site.name}'s shared file systems ({', '.join(site.shared_paths)}): the compute nodes cannot read it; move it there",
            )
        ]
    if _under(image_path, NODE_LOCAL):
        return [
            warning(
                "image-node-local",
                f"image {image_path} is in a node-local place ({', '.join(NODE_LOCAL)}): the compute nodes see their own, not this one; move it to a shared file system (home, project or scratch)",
            )
        ]
    return []
