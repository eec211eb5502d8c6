"""Every check of a launch, in one registry.

A check is a function over the planned launch (`Launch`) registered with `@check(name, about,
needs=...)`; it returns `warn(...)`, `fail(...)`, `skip(...)` or a `passed(...)` that says
more than `about`, and None for a plain pass. What it needs is declared, and a check whose
needs are not met is reported as skipped with the reason, never as passed:

- "facts": the image's build facts (its labels, or --recipe);
- "image": an image at all (a launch with runtime none has none);
- "allocation": the launch asks Slurm for an allocation (inside one, the job's options were
  given when it was allocated);
- "slurm": this machine's Slurm and GPUs can be asked (a launch from here, or doctor on the
  site's login node; a dry run asks nothing);
- "gpus": the job asks for GPUs; "nodes": it spans more than one node.

Checks that only make sense for one runtime or controller live in its module
(launcher/runtimes/, launcher/controllers/) and are skipped for the others. A launch refuses on
the first failed check; `hvd-container doctor` shows every one of them.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hvd_container.launcher import controllers, runtimes
from hvd_container.launcher.checks.declarations import Check, Need, check, declared
from hvd_container.launcher.checks.verdict import (
    Status,
    Verdict,
    fail,
    not_applicable,
    passed,
    skip,
    warn,
)
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.plan.memory import (
    RANK_NEEDS_MB,
    default_megabytes,
    node_cpus,
    node_megabytes,
    node_ranks,
)
from hvd_container.launcher.plan.scheduler_values import scheduler_values
from hvd_container.launcher.sites.loader import slurm_cluster_name
from hvd_container.launcher.slurm import slurm_megabytes, slurm_seconds

from hvd_container.core.errors import UserError
from hvd_container.core.text import ascii_digits
from hvd_container.facts import BUILT_ARCHES

if TYPE_CHECKING:
    from hvd_container.launcher.sites.model import Site

    from hvd_container.facts import ImageFacts


@dataclass(frozen=True)
class Result:
    """One check's outcome for one launch."""

    check: str
    status: Status
    message: str
    acknowledged: bool = False  # a warning the site's profile says its users know of


def acknowledged(result: Result, site: Site) -> Result:
    """The result as the site's profile wants it shown: a warning it acknowledges says so and
    is no longer printed on every launch (a failure cannot be acknowledged)."""
    if result.status != "warn" or result.check not in site.acknowledge:
        return result
    message = f"acknowledged in site {site.name}'s profile: {result.message}"
    return Result(result.check, "warn", message, acknowledged=True)


def result_of(item: Check, launch: Launch) -> Result:
    """One check's outcome: n/a where it does not apply, skipped where what it needs is missing."""
    apart = _not_for(item, launch) or _not_this_launch(item.needs, launch)
    reason = None if apart else _unmet(item.needs, launch)
    if apart:
        verdict = not_applicable(apart)
    elif reason:
        verdict = skip(reason)
    else:
        verdict = item.function(launch) or passed(item.about)
    return Result(item.name, verdict.status, verdict.message)


def refuse(launch: Launch, message: str, *keys: str) -> Verdict:
    """fail(message), unless it rests on a fact of the site's profile (`keys`, dotted) from an
    unconfirmed source: then a warning, the fact and the fix in one line, and where its source
    and how to confirm it are said (`sites show SITE --sources`). A fact nobody could confirm
    never refuses a job."""
    said = unconfirmed(launch, *keys)
    return warn(message + said) if said else fail(message)


def unconfirmed(launch: Launch, *keys: str) -> str:
    """The words a message ends with where a fact of `keys` rests on an unconfirmed source
    (where to see it and how to confirm it); nothing otherwise."""
    if launch.site.unconfirmed_source(*keys) is None:
        return ""
    return f" (unconfirmed: `hvd-container sites show {launch.site.name} --sources`)"


def _partition_key(launch: Launch) -> str:
    return f"scheduler.partitions.{launch.partition}"


def registry() -> list[Check]:
    """Every check, the general ones first, then the runtimes' and the controllers' own."""
    runtimes.kinds()  # loading the modules declares their checks
    return _loaded()


def run_checks(launch: Launch, *, every: bool = False) -> list[Result]:
    """The launch judged by the checks that can apply to it: the general ones and its own
    runtime's and controller's (the other runtimes' modules stay unloaded, about 7 ms of a
    dry run); `every` (doctor): by every check, the others' said not to apply."""
    checks = registry() if every else [c for c in _loaded() if _not_for(c, launch) is None]
    return [acknowledged(result_of(c, launch), launch.site) for c in checks]


def _loaded() -> list[Check]:
    """The checks declared by the modules loaded so far (every controller's among them): the
    general ones first, then the runtimes' and the controllers', by module name (in a module,
    as it declares them)."""
    controllers.names()
    rooms = (runtimes.__name__ + ".", controllers.__name__ + ".")

    def place(c: Check) -> tuple[int, str]:
        room = next((i + 1 for i, room in enumerate(rooms) if c.owner.startswith(room)), 0)
        return room, c.owner if room else ""

    return sorted(declared(), key=place)


def refuse_on_failure(results: list[Result]) -> None:
    """A launch stops at the first failed check, with its message as the one-line error."""
    for result in results:
        if result.status == "fail":
            raise UserError(result.message)


def _not_for(item: Check, launch: Launch) -> str | None:
    """Why a runtime's or controller's own check does not apply to this launch."""
    if (
        item.owner.startswith(runtimes.__name__ + ".")
        and type(launch.runtime).__module__ != item.owner
    ):
        return f"not for runtime {launch.runtime.kind}"
    if (
        item.owner.startswith(controllers.__name__ + ".")
        and type(launch.controller).__module__ != item.owner
    ):
        return f"not for controller {launch.controller.name}"
    return None


def _not_this_launch(needs: tuple[Need, ...], launch: Launch) -> str | None:
    """Why the rule does not apply to a launch of this shape (n/a, not a skip: nothing is
    missing to judge it)."""
    for need in needs:
        if need == "allocation" and not launch.asks_allocation:
            return "inside an allocation: Slurm took the job's options when it was allocated"
        if need == "gpus" and launch.gpus <= 0:
            return "the job asks for no GPUs"
        if need == "nodes" and (launch.nodes or 1) < 2:
            return "a single-node launch"
    return None


def _unmet(needs: tuple[Need, ...], launch: Launch) -> str | None:
    for need in needs:
        if need == "facts" and launch.facts is None:
            if launch.image is None and not launch.runtime.runs_image:
                return "no image: runtime none runs on the host"
            return (
                "the image's facts are unknown: it carries no hvd-container labels (build it "
                "with hvd-container, or run `hvd-container verify` on it) and no --recipe names it"
            )
        if need == "image" and launch.image is None:
            return "no image"
        if need == "slurm":
            reason = _machine_reason(launch)
            if reason:
                return reason
    return None


def _machine_reason(launch: Launch) -> str | None:
    if launch.machine is None:
        return "not asked: a dry run asks nothing of this machine"
    return launch.machine.not_the_site(launch.site.name)


# ------------------------------------------------------------------------- the general checks
# (in the order a launch meets them: the first failure is the error it stops with)


@check(
    "image", "the image exists where the launch reads it, as the runtime takes it", needs=("image",)
)
def image_exists(launch: Launch) -> Verdict | None:
    assert launch.image is not None
    unusable = launch.image_unreadable or launch.runtime.unusable_image(launch.image)
    if unusable:
        return fail(unusable)
    problem = launch.runtime.missing_image(launch.image, launch.image_origin)
    if problem is None:
        return passed(f"{launch.image} (runtime {launch.runtime.kind})")
    problem = _the_sites_own_image(launch) or problem
    elsewhere = launch.machine.not_the_site(launch.site.name) if launch.machine else None
    if elsewhere and launch.judged_here and launch.runtime.image_path(launch.image):
        # doctor away from the cluster: the file may well be there
        name = launch.site.name
        return skip(
            f"{launch.image} is not on this machine, which is not site {name}: run doctor on {name}'s login node, where the image is"
            + (
                ""
                if launch.request.recipe
                else ", or pass --recipe NAME to judge the recipe's facts here"
            )
        )
    if launch.judged_here or (launch.runtime.needs_image_here(launch) and not launch.dry_run):
        return fail(problem)
    return warn(f"{problem}; a launch on this machine would refuse it")


def _the_sites_own_image(launch: Launch) -> str | None:
    """For an image file in the folder where the site keeps its own (images.dir, such as
    Neuron's NGC images), what to say instead of "build it": it is there on the site."""
    assert launch.image is not None
    folder = launch.site.images.dir
    path = launch.runtime.image_path(launch.image)
    if launch.request.recipe or not folder or not folder.startswith("/") or path is None:
        return None  # an image of a recipe is the user's to build, wherever it goes
    if not (path + "/").startswith(folder.rstrip("/") + "/"):
        return None
    name = launch.site.name
    return (
        f"{launch.image_origin} {launch.image}: not on this machine; it is one of site {name}'s "
        f"own images ({folder}), checked on {name}'s login node: `ls {folder}` there lists them"
    )


@check("facts", "the image's build facts", needs=("facts",))
def image_facts(launch: Launch) -> Verdict | None:
    assert launch.facts is not None
    shown = ", ".join(f"{k} {v}" for k, v in launch.facts.known().items())
    return passed(f"{launch.facts.source}: {shown}")


@check("signature", "the image is signed by a trusted key, as the site or --keyring asks")
def image_signature(launch: Launch) -> Verdict | None:
    """A SIF's or a pushed image's signatures against the trusted keys (resolved by
    launcher/plan/signature.py): where the site requires one, an image that is unsigned, signed by another key, changed
    since, or that could not be checked is refused, with the fix; elsewhere it is said."""
    found = launch.signature
    if found is None:
        return not_applicable(
            "no key is trusted and none required (images.signatures in the site profile, "
            "or --keyring FILE)"
        )
    fix = (
        f"sign it with a trusted key (`hvd-container sign {found.path or launch.image}`), or "
        "trust the signer's public key with --keyring FILE"
    )
    if found.unjudged is not None:
        if found.required and not found.absent:  # an absent file: the image check's to say
            return fail(f"site {launch.site.name} requires a signed image: {found.unjudged}")
        return skip(found.unjudged)
    if found.holds:
        signed = f"{found.path}: signed by {', '.join(found.signers)}"
        if not found.registry:
            return passed(signed)
        if (launch.image or "").endswith(f"@{found.digest}"):
            return passed(f"{signed}; the job runs {launch.image}, the image checked")
        return warn(
            f"{signed}, but runtime {launch.runtime.kind} runs a registry image by its tag: the "
            f"job runs what the tag names when it starts (it named {found.digest} when checked)"
        )
    why = "; ".join(found.problems) or "not signed"
    if found.required:
        return fail(f"{found.path}: {why}: site {launch.site.name} requires a signed image; {fix}")
    return warn(f"{found.path}: {why}")


@check("comment", "the site's --comment rule", needs=("allocation",))
def comment(launch: Launch) -> Verdict | None:
    """Neuron refuses jobs without --comment: one application name before 2026-08-12,
    `field=<field>;appl=<application>` since."""
    rule = launch.site.scheduler.comment
    if rule.reserved:
        return _reserved_comment(launch)
    appl = launch.controller.application(launch.facts)
    value = rule.compose(launch.request.comment, appl)
    if rule.form == "field-appl":
        return _field_appl_problem(launch, value, appl)
    allowed = ", ".join(rule.allowed)
    if value is None:
        if not rule.required:
            return not_applicable(f"site {launch.site.name} asks for no --comment")
        hint = f" (allowed: {allowed})" if allowed else ""
        example = rule.allowed[0] if rule.allowed else "python"
        return refuse(
            launch,
            f"site {launch.site.name} requires --comment=<application>{hint}: pass e.g. --comment {example}",
            "scheduler.comment.required",
        )
    if rule.allowed and value not in rule.allowed:
        return warn(
            f"--comment {value!r} is not in site {launch.site.name}'s list (allowed: {allowed}); use one of them, e.g. --comment pytorch"
        )
    return None


def _reserved_comment(launch: Launch) -> Verdict | None:
    """JSC's own job tooling reads --comment: a job's comment there is the site's, not ours."""
    site = launch.site.name
    if launch.request.comment is None:
        return not_applicable(f"site {site} keeps --comment for its own tools: none is written")
    return refuse(
        launch,
        f"--comment {launch.request.comment!r}: site {site} keeps --comment for its own tools, "
        "so hvd-container writes none there; leave it out",
        "scheduler.comment.reserved",
    )


def _field_appl_problem(launch: Launch, value: str | None, appl: str | None) -> Verdict | None:
    rule = launch.site.scheduler.comment
    site = launch.site.name
    allowed = ", ".join(rule.allowed)
    fields = ", ".join(rule.fields) or "those `showappl` lists on the site"
    example_appl = (
        appl if appl in rule.allowed else (rule.allowed[0] if rule.allowed else "pytorch")
    )
    example = f'--comment "field={rule.field or "<your field>"};appl={example_appl}"'
    form = f"site {site} takes --comment in the form field=<field>;appl=<application>"
    if value is None:
        if not rule.required:
            return None
        return refuse(
            launch,
            f"{form}, and requires it (appl allowed: {allowed}; field: {fields}): pass {example}, or set scheduler.comment.field in your own profile",
            "scheduler.comment.required",
        )
    parts = rule.split(value)
    if parts is None or set(parts) != {"field", "appl"}:
        old = value if "=" not in value else None
        if old is not None:
            appl_now = old if old in rule.allowed else example_appl
            return refuse(
                launch,
                f'--comment {value!r} is the old form, which site {site} refuses: {form}; use --comment "field={rule.field or "<your field>"};appl={appl_now}"',
                "scheduler.comment.form",
            )
        return refuse(
            launch, f"--comment {value!r}: {form}; use {example}", "scheduler.comment.form"
        )
    if parts["appl"] in rule.retired:
        return refuse(
            launch,
            f"--comment {value!r}: appl={parts['appl']} (no longer accepted) is not an application of site {site} (allowed: {allowed})",
            "scheduler.comment.retired",
        )
    # the site's lists grow (`showappl` prints today's): a value not in the profile's is said,
    # not refused
    grows = "the site's list grows: run `showappl` there and use a value it shows (your own profile can add it to scheduler.comment.{})"
    if parts["appl"] not in rule.allowed:
        return warn(
            f"--comment {value!r}: appl={parts['appl']} is not among the applications site {site}'s profile knows (allowed: {allowed}); "
            + grows.format("allowed")
        )
    if rule.fields and parts["field"] not in rule.fields:
        return warn(
            f"--comment {value!r}: field={parts['field']} is not among the fields site {site}'s profile knows (allowed: {fields}); "
            + grows.format("fields")
        )
    if not parts["field"]:
        return fail(f"--comment {value!r}: field= is empty; use {example}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", parts["field"]):
        # the site's accounting reads a word; `bio#x` or `bio x` is not one it knows
        return fail(
            f"--comment {value!r}: field={parts['field']} is not a field name (letters, digits "
            f"and _ . + - only); use {example}"
        )
    return None


@check("time-limit", "the time limit fits the partition's", needs=("allocation",))
def time_limit(launch: Launch) -> Verdict | None:
    sched = launch.site.scheduler
    value = launch.scheduled.time
    interactive = launch.mode == "jupyter"
    limit = sched.max_time_for(launch.partition, interactive)
    qos = launch.scheduled.qos
    qos_limit = sched.qos_max_time.get(qos or "")
    if value and qos_limit and slurm_seconds(value) > slurm_seconds(qos_limit):
        return refuse(
            launch,
            f"--time {value}: QOS {qos} of site {launch.site.name} runs jobs of at most {qos_limit}: ask for --time {qos_limit} or less, or another --qos (and checkpoint, to go on in a new job)",
            f"scheduler.qos_max_time.{qos}",
        )
    if not value:
        return _no_time_given(launch)
    if not limit:
        return None
    if slurm_seconds(value) <= slurm_seconds(limit):
        return passed(f"{value}, within {limit}")
    info = sched.partition_info(launch.partition)
    own = info is not None and limit == info.max_time
    where = f"partition {launch.partition}" if own else f"site {launch.site.name}"
    kind = "interactive jobs" if interactive and sched.interactive_max_time else "jobs"
    limit_key = (
        f"{_partition_key(launch)}.max_time"
        if own
        else "scheduler.interactive_max_time"
        if kind == "interactive jobs"
        else "scheduler.max_time"
    )
    return refuse(
        launch,
        f"--time {value}: {where} runs {kind} of at most {limit}: ask for --time {limit} or less (and checkpoint, to go on in a new job)",
        limit_key,
    )


def _no_time_given(launch: Launch) -> Verdict | None:
    """No --time and none in the profile: the job gets the partition's default limit, which
    is often far shorter than a training (minutes at some sites): said where it is known."""
    default, key = launch.site.scheduler.default_time_for(launch.partition)
    if not default:
        return None
    where = f"partition {launch.partition}" if launch.partition else f"site {launch.site.name}"
    message = (
        f"no --time: the job gets {where}'s default limit, {default}, and is ended then; pass "
        "-t/--time (or set scheduler.time in your own profile)"
    )
    return warn(message + unconfirmed(launch, key))


@check("partition-size", "the nodes and node-time fit the partition's", needs=("allocation",))
def partition_size(launch: Launch) -> Verdict | None:
    """A partition that takes at most so many nodes, or so many node-minutes a job (CSCS's
    debug QoS: a job over its budget waits in the queue for ever)."""
    info = launch.site.scheduler.partition_info(launch.partition)
    nodes = launch.layout.nodes
    if info is None or not nodes or (info.max_nodes is None and info.max_node_minutes is None):
        return None
    key, where = _partition_key(launch), _where(launch)
    if info.max_nodes is not None and nodes > info.max_nodes:
        return refuse(
            launch,
            f"-N {nodes}: {where} runs jobs of at most {info.max_nodes} nodes: ask for "
            f"-N {info.max_nodes} or fewer, or another partition",
            f"{key}.max_nodes",
        )
    budget = info.max_node_minutes
    # without --time Slurm gives the partition's DefaultTime, else its MaxTime
    written = launch.scheduled.time
    asked = written or launch.site.scheduler.default_time_for(launch.partition)[0] or info.max_time
    if budget is None or not asked:
        return None
    minutes = -(-slurm_seconds(asked) // 60)
    if nodes * minutes <= budget:
        return passed(f"{nodes} node{'s' if nodes > 1 else ''} x {minutes} min, within {budget}")
    given = (
        f"--time {asked} on {nodes} nodes is"
        if written
        else f"no --time: the job asks for {asked}, which on {nodes} nodes is"
    )
    fit = max(budget // nodes, 1)
    return refuse(
        launch,
        f"{given} {nodes * minutes} node-minutes, but {where} runs jobs of "
        f"at most {budget} node-minutes (the job would wait for ever): ask for --time {fit} "
        f"(minutes) or fewer nodes",
        f"{key}.max_node_minutes",
    )


@check("site-names", "the QOS, partition and constraint are the site's", needs=("allocation",))
def site_names(launch: Launch) -> Verdict | None:
    """A QOS, partition or constraint the profile does not know goes to sbatch as given: said
    (never refused: a profile may not list them all), with the ones it knows."""
    sched, name, request = launch.site.scheduler, launch.site.name, launch.request
    own = scheduler_values(launch.site)  # the profile's own, what a launch gets without flags
    said = []
    qos_known = sorted({*sched.qos_max_time, *([own.qos] if own.qos else [])})
    if request.qos and qos_known and request.qos not in qos_known:
        said.append(
            f"-q {request.qos} is not a QOS of site {name}'s profile ({', '.join(qos_known)})"
        )
    # (a partition the profile does not list is refused where the request is read)
    if request.partition and not sched.partitions and not own.partition:
        how = f" (its nodes are asked for with -C {own.constraint})" if own.constraint else ""
        said.append(
            f"site {name}'s profile names no partition{how}, yet -p {request.partition} is given"
        )
    asked, feature = request.constraint, own.constraint
    if asked and feature and asked != feature:
        terms = set(re.split(r"[&|,*\[\]()]+", asked))
        if not set(re.split(r"[&|,*\[\]()]+", feature)) <= terms:
            said.append(
                f"-C {asked} leaves out site {name}'s own -C {feature} (its GPU nodes' feature)"
            )
    if not said:
        return None
    return warn(
        "; ".join(said) + ": sbatch gets it as given, and the site may refuse the job or run it "
        "on other nodes (`sinfo -s`, `sacctmgr show qos` on its login node list what it has)"
    )


@check("partition-period", "the partition's allocation period has not ended")
def partition_period(launch: Launch, today: datetime.date | None = None) -> Verdict | None:
    info = launch.site.scheduler.partition_info(launch.partition)
    if info is None or info.available_until is None:
        return not_applicable("the profile records no allocation period for the partition")
    last = datetime.date.fromisoformat(info.available_until)
    if (today or datetime.date.today()) <= last:
        return passed(f"partition {launch.partition} runs jobs until {last}")
    return refuse(
        launch,
        f"partition {launch.partition} of site {launch.site.name}: its allocation period ended "
        f"on {last} (the scheduler holds or refuses jobs there): choose another partition "
        "(--partition), or ask the site whether a new period started",
        f"{_partition_key(launch)}.available_until",
    )


def _node_fact(launch: Launch, name: str) -> tuple[int | None, str]:
    """A number of the partition's nodes (its own, else the site's), with its profile key."""
    info = launch.site.scheduler.partition_info(launch.partition)
    own = getattr(info, name) if info else None
    if own is not None:
        return own, f"{_partition_key(launch)}.{name}"
    return getattr(launch.site.scheduler, name), f"scheduler.{name}"


@check("cpus-per-node", "the CPUs asked of a node fit what the node gives a job")
def cpus_per_node(launch: Launch) -> Verdict | None:
    """--cpus-per-task x the ranks on a node, against the cores a job may have there and a
    site's cap per GPU asked for (Slurm or the site refuses the job at submission)."""
    request, sched = launch.request, launch.site.scheduler
    cpus, ranks = launch.cpus_per_task, launch.layout.node_ranks
    if not cpus or not ranks:
        return not_applicable("the job's CPUs per node are Slurm's choice (no -c or no layout)")
    need, gpus = cpus * ranks, launch.layout.gpus_per_node
    said = "" if request.cpus_per_task else f" (site {launch.site.name}'s default)"
    asked = f"--cpus-per-task {cpus}{said} x {ranks} rank{'s' if ranks > 1 else ''} per node asks for {need} CPUs"
    where = _where(launch)
    node_cpus, node_key = _node_fact(launch, "cpus_per_node")
    if node_cpus and need > node_cpus:
        return refuse(
            launch,
            f"{asked} but a node of {where} gives a job {node_cpus}: lower -c to {max(node_cpus // ranks, 1)} or the ranks per node",
            node_key,
        )
    cap, cap_key = sched.cpu_cap(launch.partition, gpus)
    per_gpu, gpu_key = _node_fact(launch, "cpus_per_gpu")
    if cap and gpus and need > cap:
        plural = "s" if gpus > 1 else ""
        allows = (
            f"{per_gpu} CPU cores per GPU ({cap} here; the scheduler refuses more)"
            if cap_key.endswith("cpus_per_gpu")
            else f"{cap} CPU cores to a job of {gpus} GPU{plural} on a node (the scheduler refuses more)"
        )
        return refuse(
            launch,
            f"{asked} with {gpus} GPU{plural} but {where} allows {allows}: lower -c to {max(cap // ranks, 1)}, or ask for more GPUs per node",
            cap_key,
        )
    site_gpus = launch.site.gpus_per_node(launch.partition)
    exclusive = "--exclusive" in (*request.sbatch_options, *sched.sbatch_options)
    if per_gpu and exclusive and launch.asks_allocation and 0 < gpus < site_gpus:
        return refuse(
            launch,
            f"--exclusive gives the job all of a node's cores, and {where} allows {per_gpu} per GPU: ask for all {site_gpus} GPUs of a node (--gpus-per-node {site_gpus}) or drop --exclusive (the job would never start)",
            gpu_key,
        )
    return passed(f"{need} CPUs a node")


@check("memory", "a node's ranks get the memory a training rank needs, within what a node has")
def memory(launch: Launch) -> Verdict | None:
    """The memory option written (given, or the tool's where the site's default is too small)
    against the site's facts: one the site refuses, more than a node has, too little a rank."""
    facts, key = launch.site.scheduler.memory_for(launch.partition)
    choice, ranks = launch.memory, node_ranks(launch.layout)
    where = _where(launch)
    if choice is None:
        if launch.request.inside_allocation:
            return not_applicable("inside an allocation the step has the job's memory")
        if facts is None:
            return skip(
                f"site {launch.site.name} states no memory facts ({key}): the job gets the "
                f"partition's default, which may be too small for a training rank "
                f"(`scontrol show partition` shows DefMemPerCPU; --mem asks for more)"
            )
        if not facts.requests:
            return passed(f"{where} gives memory with the GPUs (no --mem)")
        if facts.whole_node:
            return passed("the job gets all the memory of its nodes")
        given = default_megabytes(
            facts, launch.gpus, node_cpus(launch.layout, launch.cpus_per_task)
        )
        if given is None:
            return skip(
                f"{key} says neither a default per CPU nor per GPU: Slurm's default applies"
            )
        gives = f"{where}'s default gives a node's ranks {given}M, {given // ranks}M each"
        if given < ranks * RANK_NEEDS_MB:  # and the node's share is no more (memory.py)
            return warn(
                f"{gives}, less than the {RANK_NEEDS_MB}M a training rank holds, and a node has no more to give ({key}.per_node {facts.per_node}): fewer ranks a node, or a partition with more memory"
            )
        return passed(gives)
    flag = choice.option.partition("=")[0]
    if facts is not None and not facts.requests:
        return refuse(
            launch,
            f"{flag}: {where} takes no memory request (memory comes with the GPUs asked for): leave {flag} out",
            f"{key}.requests",
        )
    asked = node_megabytes(choice, launch.gpus)
    if asked is not None and facts is not None and facts.per_node is not None:
        most = slurm_megabytes(facts.per_node)
        if asked > most:
            return refuse(
                launch,
                f"{choice.option} asks for {asked}M a node, but a node of {where} gives a job at most {facts.per_node}: ask for less, or --mem=0 for all of it",
                f"{key}.per_node",
            )
    if asked is not None and asked < ranks * RANK_NEEDS_MB:
        return warn(
            f"{choice.option} gives a node's ranks {asked // ranks}M each, less than the {RANK_NEEDS_MB}M a training rank holds (CUDA, NCCL, the data loader): it may be killed for memory"
        )
    if choice.why is not None:
        said = unconfirmed(launch, f"{key}.per_node", f"{key}.default_per_cpu")
        return passed(f"{choice.option} written: {choice.why}{said}")
    return passed(f"{choice.option} as given")


@check("gpu-jobs-only", "a job on a GPU-only cluster asks for a GPU", needs=("allocation",))
def gpu_jobs_only(launch: Launch) -> Verdict | None:
    if not launch.site.scheduler.gpu_jobs_only:
        return not_applicable(f"site {launch.site.name} runs jobs without GPUs too")
    if launch.layout.gpus_per_node:
        return None
    return refuse(
        launch,
        f"site {launch.site.name} refuses jobs that ask for no GPU (its clusters are for GPU jobs): ask for GPUs (--gpus-per-node), or use one of the site's CPU clusters",
        "scheduler.gpu_jobs_only",
    )


def _where(launch: Launch) -> str:
    return f"partition {launch.partition}" if launch.partition else f"site {launch.site.name}"


@check("gpus-per-rank", "one GPU per rank on each node, none left idle")
def gpus_per_rank(launch: Launch) -> Verdict | None:
    layout = launch.layout
    if layout.crowded and launch.controller.one_gpu_per_rank:
        return refuse(
            launch,
            f"{layout.crowded} (under controller {launch.controller.name} a rank whose LOCAL_RANK is past the GPUs fails on cuda:LOCAL_RANK)",
            _node_fact(launch, "gpus_per_node")[1],
        )
    if layout.crowded:
        return warn(layout.crowded)
    nodes, per_node = layout.nodes, layout.gpus_per_node
    if not per_node:
        return not_applicable("the job asks for no GPUs")
    if not nodes or launch.request.gpus_per_node or launch.request.gpus_per_task:
        return None
    idle = nodes * per_node - layout.ranks
    if idle <= 0:
        return None
    return warn(
        f"-n {layout.ranks} on {nodes} nodes of {per_node} GPUs leaves {idle} GPU{'s' if idle > 1 else ''} idle (the job holds {nodes * per_node}): -n {nodes * per_node} uses them all"
    )


@check("script", "the script is here, where the launch reads it")
def script_here(launch: Launch) -> Verdict | None:
    """A .py script that is not here is started on the nodes after the queue wait anyway: said
    now (it may be in the image, or only on the cluster: a warning, not a refusal)."""
    script = launch.request.script
    if not launch.request.script_given:
        return not_applicable(
            "no script given: name it after the options (`doctor ... train.py ARGS`) to check "
            "it and its controller as run does"
        )
    if not script.endswith(".py"):
        return not_applicable("a program, not a .py script: looked up where it runs")
    if os.path.isfile(script):
        return None
    near = controllers.near_name(script)
    if near is not None:
        return warn(
            f"{script}: no such file here (did you mean {near}?): the job starts it on the nodes after its queue wait"
        )
    return warn(
        f"{script}: no such file here: the job starts it on the nodes after its queue wait; check the path (relative to the job's working directory), or that it is in the image or on the cluster's shared file system"
    )


@check("account", "the site's account suffix rule", needs=("allocation",))
def account(launch: Launch) -> Verdict | None:
    """Perlmutter GPU jobs are charged to <project>_g; other accounts are refused or wrong."""
    suffix = launch.site.scheduler.account_suffix
    value = launch.scheduled.account
    name = launch.site.name
    if value is None and launch.site.scheduler.account_required:
        return refuse(
            launch,
            f"no --account: site {name} charges every job to a project or budget and refuses "
            "one without it: pass --account PROJECT (or set scheduler.account in your own "
            "profile of the site)",
            "scheduler.account_required",
        )
    if not suffix:
        return not_applicable(f"site {name} has no account suffix rule")
    if value is None:
        return warn(
            f"no --account: Slurm charges your default project, but GPU jobs on site {name} need <project>{suffix}; pass e.g. --account m1234{suffix}"
        )
    if not value.endswith(suffix):
        return warn(
            f"--account {value}: GPU jobs on site {name} are charged to <project>{suffix}; use --account {value}{suffix}"
        )
    return None


@check("arch", "the image's architecture is the nodes'", needs=("facts",))
def arch(launch: Launch) -> Verdict | None:
    """An x86 image does not run on ppc64le nodes (ZIH ml), and so on."""
    facts, site, partition = launch.facts, launch.site, launch.partition
    assert facts is not None
    if facts.arch is None:
        return skip("the image's architecture is not known")
    site_arch = site.arch_for(partition)
    if facts.arch == site_arch:
        return passed(f"{facts.arch}, as the nodes")
    info = site.scheduler.partition_info(partition)
    own_arch = info is not None and info.arch is not None and info.arch != site.arch
    where = f"partition {partition} of site {site.name}" if own_arch else f"site {site.name}"
    return refuse(
        launch,
        f"{facts.source} is built for {facts.arch} but {where} runs {site_arch}: {_other_arch_fix(facts, site_arch)}",
        f"{_partition_key(launch)}.arch" if own_arch else "arch",
    )


def _other_arch_fix(facts: ImageFacts, site_arch: str) -> str:
    """What works: the recipe's image for the nodes' architecture, built with --arch (a
    built-in recipe cannot be edited, and need not be), else a site of the image's."""
    elsewhere = f"pick a site with {facts.arch} nodes"
    if site_arch not in BUILT_ARCHES or not facts.name:
        return f"use an image built for {site_arch} (a recipe with `arch: {site_arch}`), or {elsewhere}"
    tag = f"{facts.name}:{facts.version or 'VERSION'}-{site_arch}"
    sif = f"{facts.name}_{facts.version or 'VERSION'}-{site_arch}.sif"
    return (
        f"build the recipe's {site_arch} image (`hvd-container build {facts.name} --arch "
        f"{site_arch}`, then `hvd-container convert {tag} --to sif`) and pass --image {sif}, "
        f"or {elsewhere}"
    )


@check("controller", "the image has what the controller needs", needs=("facts",))
def controller_in_image(launch: Launch) -> Verdict | None:
    return launch.controller.missing_in_image(launch)


@check("task-env", "the runtime passes srun's per-task variables to the program")
def task_env(launch: Launch) -> Verdict | None:
    problem = launch.runtime.dropped_task_env(launch)
    return fail(problem) if problem else None


@check("modules", "the runtime's modules")
def modules(launch: Launch) -> Verdict | None:
    return launch.runtime.module_problem(launch)


@check("site-modules", "inside an allocation, the runtime's program is found (the site's modules)")
def site_modules_here(launch: Launch) -> Verdict | None:
    """Inside an allocation the step runs from this shell, which the batch script's `module
    load` never reached (Neuron: singularity comes from singularity/4.3.4)."""
    modules = launch.site.modules
    if not (launch.request.inside_allocation and launch.judged_here and modules):
        return not_applicable("only a step run here, on a site with modules, needs them here")
    program = type(launch.runtime).programs.get(launch.runtime.kind)
    if program is None or shutil.which(program):
        return None
    loads = " ".join(modules)
    return refuse(
        launch,
        f"{program} is not on PATH in this shell, and the step runs it from here: site "
        f"{launch.site.name}'s jobs load `module load {loads}` first (as its batch scripts "
        f"do); run that in this allocation's shell, then this command again",
        "modules",
    )


@check("mpi-abi", "the MPI a runtime injects can replace the image's", needs=("facts",))
def mpi_abi(launch: Launch) -> Verdict | None:
    """The host MPI a runtime injects replaces libmpi.so.12 (MPICH ABI) only: an Open MPI
    image keeps its own MPI, which then runs over TCP instead of the site's network."""
    facts = launch.facts
    assert facts is not None
    if launch.single_task or not launch.controller.uses_host_mpi:
        return skip("the launch uses no MPI between tasks")
    if not launch.runtime.injects_host_mpi(launch):
        return skip(f"runtime {launch.runtime.kind} injects no MPI here")
    if not facts.mpi_family or facts.mpi_family == "mpich":
        return None
    soname = MPI_SONAMES.get(facts.mpi_family, "its own library")
    return warn(
        f"{launch.runtime.kind} injects the site's Cray MPICH, which replaces an image's libmpi.so.12 (MPICH ABI) only; {facts.source} has {facts.mpi_family} ({soname}), so its ranks use the image's own MPI over TCP: build the image with PyPI's MPICH (mpi: {{flavor: mpich, source: pip}}, libmpi.so.12), or use --controller gloo"
    )


# What each MPI family's library is called inside an image (Debian/Ubuntu packages).
MPI_SONAMES = {"openmpi": "libmpi.so.40", "mpich": "libmpich.so.12"}


@check("glibc", "the image's glibc loads the libraries the runtime injects", needs=("facts",))
def glibc(launch: Launch) -> Verdict | None:
    """Libraries a runtime injects (Cray MPICH, the GPU driver's) need the glibc they were
    built against: an older one in the image fails at load time ("GLIBC_2.xx not found")."""
    facts, needed = launch.facts, launch.runtime.profile.injects_glibc
    assert facts is not None
    if needed is None:
        return skip(f"site {launch.site.name}'s profile names no glibc for {launch.runtime.kind}")
    if not facts.glibc and facts.recipe_only:
        return skip(
            f"{facts.source} does not say its image's glibc (the build records it): judge the "
            "built image with --image IMAGE"
        )
    if not facts.glibc:
        return skip(f"{facts.source}'s glibc is not recorded (hvd-container verify records it)")
    if numbers(facts.glibc)[:2] >= numbers(needed):
        return None
    return refuse(
        launch,
        f"{facts.source} has glibc {facts.glibc}, but the libraries {launch.runtime.kind} injects need glibc >= {needed}: they fail to load (GLIBC_{needed} not found); rebuild on a newer base (Debian 11+, Ubuntu 20.04+)",
        "runtime.injects_glibc",
    )


@check("runtime-gpu", "the runtime gives the container the GPUs asked for", needs=("gpus",))
def runtime_gpu(launch: Launch) -> Verdict | None:
    """A runtime that leaves the container without the GPUs the job asks for (typically a
    --runtime the site profile does not configure)."""
    gap = launch.runtime.gpu_gap(launch)
    if gap is None:
        return None
    return warn(
        f"runtime {launch.runtime.kind}: the job asks for {launch.gpus} GPUs per node but {gap}"
    )


@check("gpu-request", "GPUs asked for where the image uses them", needs=("facts",))
def gpu_request(launch: Launch) -> Verdict | None:
    facts = launch.facts
    assert facts is not None
    if facts.gpu is None:
        return skip("whether the image is a CUDA one is not known")
    if facts.gpu and launch.gpus <= 0:
        return warn(
            f"{facts.source} is a CUDA image but the job asks for no GPUs: it runs on the CPU and NCCL stays unused; pass --gpus-per-node N"
        )
    if not facts.gpu and launch.gpus > 0:
        return warn(
            f"{facts.source} is a CPU image but the job asks for {launch.gpus} GPUs per node: the GPUs stay idle; build a CUDA recipe"
        )
    return None


@check("gpu-operations", "GPU tensors are reduced with NCCL", needs=("facts", "gpus"))
def gpu_operations(launch: Launch) -> Verdict | None:
    return launch.controller.gpu_problem(launch)


# The oldest driver each CUDA major runs on (CUDA's minor-version compatibility: any driver of
# the major's first release runs every minor of it). NVIDIA's CUDA compatibility table.
CUDA_MIN_DRIVER = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}


def numbers(version: str) -> tuple[int, ...]:
    """ "550.127.05" -> (550, 127, 5); what is not a number ends it."""
    out: list[int] = []
    for part in version.split("."):
        if not ascii_digits(part):
            break
        out.append(int(part))
    return tuple(out)


def driver_at_least(driver: str, needed: str) -> bool:
    """Whether driver (as precise as known: "580" or "580.65.06") reaches needed."""
    have, want = numbers(driver), numbers(needed)
    return have >= want[: len(have)]


@check("cuda-driver", "the image's CUDA runs on the nodes' driver", needs=("facts", "gpus"))
def cuda_driver(launch: Launch) -> Verdict | None:
    """An image's CUDA needs a driver at least as new as its major's first release: the
    driver of this node's GPUs (nvidia-smi, where this machine is the site), else the one the
    site's profile records."""
    facts = launch.facts
    assert facts is not None
    if not facts.cuda:
        return skip("the image's CUDA is not known" if facts.cuda is None else "a CPU image")
    needed = CUDA_MIN_DRIVER.get(facts.cuda.split(".")[0])
    driver, where = None, ""
    keys: tuple[str, ...] = ()  # the profile's facts a refusal would rest on
    if launch.machine is not None and launch.machine.not_the_site(launch.site.name) is None:
        driver, where = launch.machine.nvidia_driver, "this node (nvidia-smi)"
    if driver is None and launch.site.gpu_driver is not None:
        driver, where = launch.site.gpu_driver, f"site {launch.site.name}'s profile (gpu_driver)"
        keys = ("gpu_driver",)
    if driver is None:
        return skip(
            f"the nodes' NVIDIA driver is not known (no nvidia-smi here, no gpu_driver in site {launch.site.name}'s profile): CUDA {facts.cuda} needs >= {needed or '?'}; run doctor on a GPU node, or record gpu_driver in the profile"
        )
    if needed is None or driver_at_least(driver, needed):
        return passed(f"driver {driver} ({where}) runs CUDA {facts.cuda}")
    fits = [m for m, d in CUDA_MIN_DRIVER.items() if driver_at_least(driver, d)]
    fix = f"build the image for CUDA {fits[-1]}" if fits else "ask the site for a newer driver"
    return refuse(
        launch,
        f"{facts.source} is built for CUDA {facts.cuda}, which needs NVIDIA driver >= {needed}; {where} has {driver}: {fix}",
        *keys,
    )


# the built-in recipe whose framework still carries Volta's code (its own test says so)
CUDA_12_RECIPE = "gpu-bookworm-torch-cu12"


@check("gpu-arch", "the image's GPU code runs on the partition's GPUs", needs=("facts", "gpus"))
def gpu_arch(launch: Launch) -> Verdict | None:
    """CUDA 13 dropped Volta (sm_70); a framework's code runs on a GPU of compute capability
    cc when it has sm_NN machine code of cc's major with NN <= cc, or compute_NN PTX (which the
    driver compiles) with NN <= cc. Else the job dies at its first kernel ("no kernel image is
    available"), after the queue wait."""
    facts = launch.facts
    assert facts is not None
    gpu, cc = launch.site.scheduler.gpu_model(launch.partition)
    where = f"partition {launch.partition}" if launch.partition else f"site {launch.site.name}"
    if cc is None:
        return skip(
            f"the GPUs of {where} are not known: add gpu: <model> (or gpu_cc:) to its partition in the profile (scheduler.gpu on a site without partitions)"
        )
    model = gpu or f"compute capability {cc}"
    other = "choose a partition with newer GPUs (--partition)"
    cuda_major = facts.cuda.split(".")[0] if facts.cuda else ""
    if ascii_digits(cuda_major) and int(cuda_major) >= 13 and int(cc) < 75:
        return refuse(
            launch,
            f"{facts.source} is built with CUDA {facts.cuda}, which dropped GPUs below compute capability 7.5, and {where} has {model} ({cc[:-1]}.{cc[-1]}): the job would die with 'no kernel image is available'; use an image with CUDA 12 (the built-in recipe {CUDA_12_RECIPE}: --recipe {CUDA_12_RECIPE}, kernels from sm_70), or {other}",
            _partition_key(launch),
        )
    for whose, code in facts.gpu_code():
        if not runs_on(code, cc):
            return refuse(
                launch,
                f"{facts.source}'s {whose} carries GPU code for {', '.join(code)}, none of which runs on {where}'s {model} (sm_{cc}): rebuild it for {cc} (horovod.cuda_cc, or a torch built for it), or {other}",
                _partition_key(launch),
            )
    if not facts.gpu_code():
        return skip(
            f"{facts.source}'s GPU code is not recorded (verify records torch's; horovod.cuda_cc Horovod's)"
        )
    return passed(f"{facts.source}'s GPU code runs on {model} (sm_{cc})")


def runs_on(code: tuple[str, ...], cc: str) -> bool:
    """Whether sm_NN machine code (same major, NN <= cc) or compute_NN PTX (NN <= cc) runs on a
    GPU of compute capability cc (digits: 90 for 9.0)."""
    for item in code:
        kind, _, digits = item.partition("_")
        digits = digits.rstrip("af")  # sm_90a, sm_100f: arch-specific, same rule at worst
        if not ascii_digits(digits):
            continue
        if kind == "compute" and int(digits) <= int(cc):
            return True
        if kind == "sm" and digits[:-1] == cc[:-1] and int(digits) <= int(cc):
            return True
    return False


@check("known-bad", "no library version of the image is known to be wrong", needs=("facts", "gpus"))
def known_bad_versions(launch: Launch) -> Verdict | None:
    facts = launch.facts
    assert facts is not None
    if facts.nccl is None:
        return skip(f"{facts.source}'s NCCL version is not recorded (verify records it)")
    # the table of known-bad versions (and packaging) only for an image with facts: about 2 ms
    from hvd_container import known_bad

    found = known_bad.problems({"nccl": facts.nccl})
    if not found:
        return passed(f"NCCL {facts.nccl or 'none'}: no known-bad version")
    entry, version = found[0]
    return warn(
        f"{facts.source} has {entry.library} {version}, known-bad: {entry.effect} ({entry.source}); {entry.fix}"
    )


@check("image-ignored", "the runtime runs the image named")
def image_ignored(launch: Launch) -> Verdict | None:
    if not launch.runtime.runs_image and launch.request.image:
        return warn(
            f"runtime {launch.runtime.kind} runs on the host: --image {launch.request.image} is ignored (pick a container runtime with --runtime)"
        )
    return None


@check("registry", "an image named from a recipe has a registry", needs=("image",))
def registry_for_recipe(launch: Launch) -> Verdict | None:
    """--recipe on a site that pulls from a registry needs the site's images.registry: without
    it the recipe's NAME:VERSION means docker.io/library/NAME, where no build was pushed."""
    ref = launch.image
    assert ref is not None
    if launch.request.image or launch.request.recipe is None:
        return not_applicable("the image was not named from --recipe")
    if launch.site.images.registry:
        return None
    repository = ref.rsplit("@", 1)[0].rsplit(":", 1)[0] if "/" not in ref else ref
    if runtimes.is_file_ref(ref) or "/" in repository or "://" in ref:
        return None
    return fail(
        f"--recipe: site {launch.site.name} has no images.registry, so the image would be "
        f"docker.io/library/{ref}, where `hvd-container push` never puts it: pass --image "
        "REGISTRY/NAME:TAG (what push printed), or set images.registry in the site profile"
    )


# Places that are each node's own on clusters (the login node's /tmp is not the compute node's).
NODE_LOCAL = ("/tmp", "/var/tmp", "/dev/shm", "/run")


def _under(path: str, roots: list[str] | tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


@check("image-location", "the image is where the compute nodes see it", needs=("image",))
def image_location(launch: Launch) -> Verdict | None:
    """A file image must be where the compute nodes see it (a shared file system)."""
    assert launch.image is not None
    path = launch.runtime.image_path(launch.image)
    if path is None:
        if not launch.runtime.pulls_itself:
            return skip(
                f"a registry image, which {launch.runtime.kind} runs once pulled (check image-pulled)"
            )
        return skip("a registry image: the runtime pulls it")
    if launch.runtime.missing_image(launch.image, "") is not None:
        # a dry run may name an image that lives on the cluster: only one that is here is judged
        return skip(f"{launch.image} is not on this machine")
    site = launch.site
    avoided = next((root for root in site.images.not_for_work if _under(path, [root])), None)
    if avoided is not None:
        return warn(
            f"image {path} is on {avoided}, which site {site.name} asks not to work from: {site.images.not_for_work[avoided]}"
        )
    if site.shared_paths:
        if _under(path, site.shared_paths):
            return None
        return fail(
            f"image {path} is outside site {site.name}'s shared file systems ({', '.join(site.shared_paths)}): the compute nodes cannot read it; move it there"
        )
    if _under(path, NODE_LOCAL):
        return warn(
            f"image {path} is in a node-local place ({', '.join(NODE_LOCAL)}): the compute nodes see their own, not this one; move it to a shared file system (home, project or scratch)"
        )
    return None


@check("image-pulled", "a runtime that does not pull has the image pulled", needs=("image",))
def image_pulled(launch: Launch) -> Verdict | None:
    """A runtime that does not pull (Shifter) runs only images its gateway has pulled: its own
    listing asked here where it answers, else said with the command (a job would fail at its
    start, after the queue wait)."""
    assert launch.image is not None
    runtime = launch.runtime
    if runtime.pulls_itself:
        return not_applicable(f"{runtime.kind} pulls a registry image itself")
    if runtime.image_path(launch.image) is not None:
        return not_applicable("an image file, not a registry image")
    if runtime.unusable_image(launch.image):
        return skip("not an image this runtime takes (check image)")
    hint = runtime.pull_hint(launch.image)
    reason = _machine_reason(launch)
    command = runtime.images_listing
    asked = not reason and launch.machine is not None and command
    listing = launch.machine.listing(command) if asked and launch.machine else None
    if listing is None:
        return warn(
            f"{runtime.kind} runs only images its gateway has pulled: run `{hint}` on a login node before the job (doctor there checks it)"
        )
    if runtime.pulled(launch.image, listing):
        return passed(f"{launch.image} is pulled ({runtime.kind}'s image list)")
    return fail(f"{launch.image} is not among {runtime.kind}'s pulled images: run `{hint}` first")


@check("nccl-interface", "NCCL's network interface is named", needs=("gpus", "nodes"))
def nccl_interface(launch: Launch) -> Verdict | None:
    """Across nodes NCCL may bootstrap over the wrong interface (docker0, lo) unless told."""
    if "NCCL_SOCKET_IFNAME" in launch.env:
        return None
    if launch.site.nccl_finds_network:
        return not_applicable(_nccl_left_to_itself(launch))
    # the data goes over a network plugin or transport, not a socket; NCCL's own bootstrap
    # leaves out docker* and lo by itself (NCCL_SOCKET_IFNAME's default)
    network = launch.env.get("NCCL_NET", "")
    if network and network.lower() != "socket":
        return not_applicable(
            f"NCCL_NET={network}: the data goes over that network's plugin, not a socket"
        )
    brought = launch.runtime.brings_nccl_plugin(launch)
    if brought and not network:
        return not_applicable(f"{brought} brings NCCL's network plugin: the data goes over it")
    return warn(
        f"site {launch.site.name} sets no NCCL_SOCKET_IFNAME for this {launch.nodes}-node GPU launch: NCCL may pick the wrong interface (docker0, lo); add `NCCL_SOCKET_IFNAME: <interface>` (e.g. ib0, hsn) to the site profile's env, or pass -e NCCL_SOCKET_IFNAME=<interface>"
    )


@check(
    "nccl-network",
    "NCCL's network is forced, so a missing plugin fails at start",
    needs=("gpus", "nodes"),
)
def nccl_network(launch: Launch) -> Verdict | None:
    """Across nodes, NCCL without its network plugin falls back to TCP without a word; a
    forced NCCL_NET makes a missing plugin fail at start instead."""
    if "NCCL_NET" not in launch.env and launch.site.nccl_finds_network:
        return not_applicable(_nccl_left_to_itself(launch))
    brought = launch.runtime.brings_nccl_plugin(launch)
    if "NCCL_NET" not in launch.env and brought:
        return not_applicable(
            f"{brought} brings NCCL's network plugin into the container, and NCCL uses it (the "
            "launch forces no NCCL_NET over it)"
        )
    if "NCCL_NET" not in launch.env:
        return warn(
            f"site {launch.site.name} sets no NCCL_NET for this {launch.nodes}-node GPU launch: if NCCL's network plugin is missing it falls back to TCP without a word; set NCCL_NET (e.g. 'AWS Libfabric' on Slingshot, IB on InfiniBand) in the profile's env or with -e, so a missing plugin fails at start"
        )
    problem = launch.runtime.missing_nccl_plugin(launch)
    return fail(problem) if problem else None


def _nccl_left_to_itself(launch: Launch) -> str:
    found = launch.site.unconfirmed_source("nccl_finds_network")
    said = f" ({found[1].about}, unconfirmed)" if found else ""
    return f"site {launch.site.name}'s profile says NCCL finds its network there by itself{said}"


@check("gpus-per-task", "every rank sees all the node's GPUs")
def gpus_per_task(launch: Launch) -> Verdict | None:
    """--gpus-per-task hides all GPUs but one from each rank (set_device(local_rank) fails)."""
    if launch.request.gpus_per_task is None:
        return None
    flag = "--gres=gpu:N" if launch.site.scheduler.gpu_request == "gres" else "--gpus-per-node=N"
    return warn(
        f"--gpus-per-task makes every rank see only GPU 0 (set_device(local_rank) fails, no P2P): requesting {flag} with --gpu-bind=none instead; pass --gpus-per-node to silence this"
    )


@check("cluster", "this machine's Slurm is the site's cluster", needs=("slurm",))
def cluster(launch: Launch) -> Verdict | None:
    """A launch for one site from another cluster's login node would hand the other Slurm
    this site's partitions, account and modules: refused where it submits, said inside an
    allocation (the step runs where the allocation is)."""
    site, names = launch.site.name, launch.site.cluster_names
    if not names:
        return not_applicable(f"site {site}'s profile names no Slurm cluster")
    here = slurm_cluster_name()
    if here is None:
        return skip(
            "this machine's Slurm cluster is not known (no $SLURM_CLUSTER_NAME, no ClusterName in slurm.conf)"
        )
    if here in names:
        return passed(f"cluster {here}")
    message = (
        f"this machine's Slurm is cluster {here}, not site {site}'s ({', '.join(names)}): the job "
        f"would carry {site}'s partitions, account and modules to it; pass the --site of cluster "
        f"{here} (`hvd-container sites list`), or launch from {site}'s login node"
    )
    return refuse(launch, message, "cluster_names") if launch.asks_allocation else warn(message)


@check("srun-mpi", "srun offers the --mpi plugin", needs=("slurm",))
def srun_mpi(launch: Launch) -> Verdict | None:
    assert launch.machine is not None
    offered = launch.machine.srun_mpi_plugins
    if offered is None:
        return skip("srun is not here: its MPI plugins are not checked")
    if not launch.mpi:
        return passed("srun's default plugin")
    if launch.mpi in offered:
        return passed(f"srun offers --mpi={launch.mpi}")
    return fail(
        f"--mpi={launch.mpi}: this cluster's srun does not offer it (allowed: {', '.join(offered)}); "
        "pick one the image's MPI speaks, e.g. --mpi pmix for Debian's Open MPI"
    )
