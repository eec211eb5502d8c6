"""Site profiles: what a cluster needs in its srun/sbatch lines, as validated data.

The loaders beside it (launcher/sites/loader.py) find, read, trust and choose profiles.

A profile is validated like a recipe (core/yamlconf.py): pydantic models, every error one line
``FILE:LINE: key.path: problem (allowed: ...)``, and the JSON Schema for editors made from the
same models. The keys of each runtime entry are the runtime's own (launcher/runtimes/).
"""

from __future__ import annotations

import datetime
import os
import re
import string
from collections.abc import Callable
from typing import Annotated, Any, Literal

from hvd_container.launcher import guard, runtimes
from hvd_container.launcher.plan.binds import parse_bind, split_binds
from hvd_container.launcher.runtimes import RuntimeProfile
from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationInfo,
    model_validator,
)

from hvd_container.core.model import (
    NAME_PATTERN,
    NAME_WORDS,
    ByKind,
    ControllerName,
    EnvName,
    Line,
    Strict,
    empty_dict,
    empty_list,
)

Arch = Literal["amd64", "arm64", "ppc64le"]
MpiPlugin = Literal["pmi2", "pmix", "pmix_v3", "pmix_v4", "pmix_v5", "cray_shasta", "none"]
MPI_PLUGINS: tuple[str, ...] = MpiPlugin.__args__  # type: ignore[attr-defined]
GpuRequest = Literal["gres", "gpus-per-node", "none"]

_MACHINE_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
TEMPLATE_FIELDS = ("name", "version", "registry", "dir")

_NAME_PATTERN = NAME_PATTERN
_TIME_PATTERN = r"^([0-9]+-)?[0-9]+(:[0-9]{1,2}){0,2}$"
_DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}(-[0-9]{2})?$"
_DRIVER_PATTERN = r"^[0-9]{3}(\.[0-9]{1,3}){0,2}$"
_INTERFACE_PATTERN = r"^[A-Za-z0-9_.:@-]{1,15}$"
_URL_PATTERN = r"^https?://\S+$"
_PARTITION_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}$"
PARTITION_WORDS = "letters, digits and _ . + - (at most 64), as Slurm names partitions"
# What each pattern allows, in words: error messages say this, never the expression.
PATTERN_WORDS = {
    _NAME_PATTERN: NAME_WORDS,
    _TIME_PATTERN: "a Slurm time: MINUTES, HH:MM:SS or D-HH:MM:SS",
    _DATE_PATTERN: "a date YYYY-MM-DD (or YYYY-MM)",
    _DRIVER_PATTERN: 'an NVIDIA driver version such as "535" or "550.127.05"',
    _INTERFACE_PATTERN: "a network interface name (letters, digits, _ . : @ -; at most 15 characters), e.g. hsn0",
    _URL_PATTERN: "an http(s) URL",
    _PARTITION_PATTERN: PARTITION_WORDS,
}
MAX_GPUS_PER_NODE = 64
MAX_CPUS_PER_NODE = 1 << 16


def valid_site_name(value: str) -> bool:
    """A profile's name (and its file's): lower-case letters, digits and . _ - between them."""
    return bool(re.fullmatch(_NAME_PATTERN[1:-1], value))


def valid_partition_name(value: str) -> bool:
    return bool(re.fullmatch(_PARTITION_PATTERN[1:-1], value))


def valid_slurm_time(value: str) -> bool:
    """MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS."""
    return bool(re.fullmatch(_TIME_PATTERN[1:-1], value))


def _binds_ok(value: list[str], info: ValidationInfo) -> list[str]:
    for bind in (one for item in value for one in split_binds(item)):
        parsed = parse_bind(bind, allow_unexpanded=True)
        if isinstance(parsed, str):
            raise ValueError(parsed)
        why = guard.bind_refusal(parsed.source, parsed.dest)
        if why is not None:
            guard.judge(guard.Refusal(f"{bind!r}: {why.why}", why.trustable), info)
    return value


def _options_ok(command: str) -> Any:
    """A validator of srun_options (command srun) or sbatch_options (sbatch): the guard's."""

    def check(value: list[str], info: ValidationInfo) -> list[str]:
        for option in value:
            if command == "sbatch" and any(c.isspace() for c in option):
                raise ValueError(f"{option!r}: options of #SBATCH lines cannot contain spaces")
            guard.judge(guard.slurm_entry_refusal(option, command), info)
        return value

    return check


def _env_ok(value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
    for name in value:
        why = guard.env_refusal(name)
        if why is not None:
            guard.judge(guard.Refusal(f"{name}: {why.why}", why.trustable), info)
    return value


def _each(rule: Callable[[str], str | None], shown: Callable[[str], str] = repr) -> Any:
    """A validator that holds each entry (each key of a mapping) to one of guard's rules."""

    def check(value: Any) -> Any:
        for entry in value:
            why = rule(entry)
            if why:
                raise ValueError(f"{shown(entry)}: {why}")
        return value

    return check


def _template_ok(value: str) -> str:
    """images.template may use the documented placeholders, plainly: {name}, {version}, ..."""
    allowed = ", ".join("{" + name + "}" for name in TEMPLATE_FIELDS)
    try:
        for _text, field_name, spec, conversion in string.Formatter().parse(value):
            if field_name is None:
                continue
            if field_name not in TEMPLATE_FIELDS or conversion or spec:
                shown = "{" + field_name + (f"!{conversion}" if conversion else "")
                shown += (f":{spec}" if spec else "") + "}"
                raise ValueError(
                    f"not a usable template: unknown placeholder {shown} (allowed: {allowed})"
                )
    except ValueError as exc:  # unbalanced braces too
        if "not a usable template" in str(exc):
            raise
        raise ValueError(f"not a usable template: {exc} (allowed: {allowed})") from None
    return value


def _abs_paths_ok(value: list[str]) -> list[str]:
    bad = [v for v in value if not v.startswith("/")]
    if bad:
        raise ValueError(f"absolute paths, not {bad[0]!r}")
    return value


# the validation context's key for the names `acknowledge` may take: the loader asks the check
# registry (launcher/checks/registry.py), which the model does not import
CHECK_NAMES = "check_names"


def _check_names(value: list[str], info: ValidationInfo) -> list[str]:
    # the context holds a function: the checks are listed (every runtime's module loaded,
    # about 7 ms) only for a profile that acknowledges one
    names_of = (info.context or {}).get(CHECK_NAMES)
    if names_of is None or not value:  # made in code, not read from a file; or nothing to hold
        return value
    names = names_of()
    unknown = [v for v in value if v not in names]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a check (allowed: {', '.join(names)})")
    return value


def _unique(value: list[str]) -> list[str]:
    if len(set(value)) != len(value):
        raise ValueError("each entry may appear once")
    return value


Name = Annotated[str, Field(pattern=_NAME_PATTERN)]
PartitionName = Annotated[str, Field(pattern=_PARTITION_PATTERN)]
SlurmTime = Annotated[Line, Field(pattern=_TIME_PATTERN)]
# a memory size as Slurm reads one (str_to_mbytes): megabytes, or a number with K, M, G or T
MEM_PATTERN = r"^[0-9]{1,9}[KMGT]?$"
PATTERN_WORDS[MEM_PATTERN] = (
    "a memory size as Slurm writes it: megabytes, or a number with K, M, G or T (64G, 990000M)"
)
MemSize = Annotated[str, Field(pattern=MEM_PATTERN)]


_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_.+-]+)*$"
PATTERN_WORDS[_KEY_PATTERN] = (
    "a dotted key of the profile (gpu_driver, runtime.injects_glibc, scheduler.partitions.NAME)"
)


class Source(Strict):
    """Where a fact of the profile comes from (a page, or `sites probe` on a login node), when
    it was checked, and whether it could be confirmed (`sites show` names the unconfirmed).
    `keys`: the profile's keys it backs; a check that would refuse a job on one of them only
    warns while the source is unconfirmed."""

    about: Line
    url: Annotated[str, Field(pattern=_URL_PATTERN)] | None = None
    probed: Line | None = Field(
        default=None, description="`sites probe` read it on this host (HOST, DATE)."
    )
    checked: Annotated[str, Field(pattern=_DATE_PATTERN)]
    confirmed: bool = True
    keys: list[Annotated[str, Field(pattern=_KEY_PATTERN)]] = Field(
        default_factory=empty_list,
        description="The profile's keys this source backs, dotted (gpu_driver, "
        "runtime.injects_glibc: every runtime entry's, scheduler.partitions.NAME: all of that "
        "partition's). While it is unconfirmed, a check that rests on one warns, never refuses.",
    )

    @model_validator(mode="after")
    def _says_where(self) -> Source:
        if (self.url is None) == (self.probed is None):
            raise ValueError("give either url (a page) or probed (HOST, DATE), one of them")
        return self

    @property
    def where(self) -> str:
        return self.url or f"probed on {self.probed}"


_COMMENT_WORD = r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"
PATTERN_WORDS[_COMMENT_WORD] = "a word: letters, digits and _ . + - only"
CommentWord = Annotated[str, Field(pattern=_COMMENT_WORD)]


class Comment(Strict):
    """A `--comment` the scheduler insists on. `form: word` is one application name;
    `form: field-appl` is KISTI Neuron's `field=<field>;appl=<application>` (since
    2026-08-12), both parts from the site's lists (`showappl` there prints them)."""

    required: bool = False
    form: Literal["word", "field-appl"] = "word"
    default: Line | None = None
    allowed: list[CommentWord] = Field(
        default_factory=empty_list, description="The applications (appl=) the site accepts."
    )
    fields: list[CommentWord] = Field(
        default_factory=empty_list,
        description="The fields (field=) the site accepts; empty: not known, any word passes.",
    )
    field: CommentWord | None = Field(
        default=None, description="Your field, for the comments hvd-container composes."
    )
    retired: list[CommentWord] = Field(
        default_factory=empty_list,
        description="Applications the site no longer accepts (their jobs are refused).",
    )
    reserved: bool = Field(
        default=False,
        description="The site's own tools use --comment (JSC's): none is written there, and a "
        "--comment given is refused (warned of and left out while the source is unconfirmed).",
    )

    @model_validator(mode="after")
    def _reserved_is_not_required(self) -> Comment:
        if self.reserved and (self.required or self.default):
            raise ValueError(
                "reserved: a comment the site keeps for itself cannot be required or have a default"
            )
        return self

    @staticmethod
    def split(value: str) -> dict[str, str] | None:
        """`field=X;appl=Y` as {"field": X, "appl": Y}; None if it is not KEY=VALUE;..."""
        parts: dict[str, str] = {}
        for item in value.split(";"):
            key, sep, word = item.partition("=")
            if not sep or not key or key in parts:
                return None
            parts[key] = word
        return parts

    def compose(self, given: str | None, appl: str | None) -> str | None:
        """The comment a job gets: --comment wins; in the field-appl form a given
        `field=X` alone, or the profile's field, gets the launch's application added; none
        where the site keeps --comment for itself."""
        if self.reserved:
            return None
        if self.form != "field-appl":
            return given or self.default
        if given is not None:
            parts = self.split(given)
            if parts is not None and "field" in parts and "appl" not in parts and appl:
                return f"{given};appl={appl}"
            return given
        if self.default:
            return self.default
        if self.field and appl:
            return f"field={self.field};appl={appl}"
        return None


# Compute capability of the GPU models the profiles name (NVIDIA's "CUDA GPUs" table): what
# GPU code runs there. A model not listed is given with the partition's `gpu_cc`.
GPU_CC = {
    "P100": "60", "V100": "70", "T4": "75", "A100": "80", "A30": "80", "A40": "86", "A10": "86",
    "L4": "89", "L40": "89", "L40S": "89", "H100": "90", "H200": "90", "GH200": "90",
    "B200": "100", "GB200": "100",
}  # fmt: skip


def _day_ok(value: str) -> str:
    """A calendar day, YYYY-MM-DD."""
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a day YYYY-MM-DD") from None
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        raise ValueError(f"{value!r} is not a day YYYY-MM-DD")
    return value


CPUS_PER_NODE_ABOUT = (
    "The CPU cores a job may ask for on a node (a site that keeps some for itself says the "
    "number left, e.g. 56 of 64)."
)
CPUS_BY_GPU_COUNT_ABOUT = (
    "Where a site caps a job's CPU cores on a node by a table of the GPUs it asks for there "
    "(ZIH: 7 GPUs -> 40, 8 -> 46): GPUs -> cores; a count it does not list is cpus_per_gpu x "
    "GPUs."
)
CPUS_PER_GPU_ABOUT = (
    "The most CPU cores a job may ask for on a node per GPU it asks for there (sites that "
    "keep GPUs usable refuse more: 'Requested CPU cores per node (10) exceed the allowed "
    "limit (8)'); --exclusive then needs all of a node's GPUs."
)


class Memory(Strict):
    """What Slurm gives a job of a node's memory when it asks for none, and what it may ask
    for (the facts of `scontrol show partition`: DefMemPerCPU, DefMemPerGPU, MaxMemPerNode)."""

    per_node: MemSize | None = Field(
        default=None,
        description="The most memory a job may ask for on one node (MaxMemPerNode, else the "
        "nodes' memory less what the site keeps), e.g. 990000M.",
    )
    default_per_cpu: MemSize | None = Field(
        default=None,
        description="What a job that asks for no memory gets per CPU (DefMemPerCPU; ZIH: 300M).",
    )
    default_per_gpu: MemSize | None = Field(
        default=None, description="What it gets per GPU (DefMemPerGPU)."
    )
    whole_node: bool = Field(
        default=False,
        description="A job is given all the memory of its nodes (nodes are not shared "
        "between jobs: CSCS Alps, JSC).",
    )
    requests: bool = Field(
        default=True,
        description="The scheduler takes --mem/--mem-per-gpu (KISTI Neuron: no, memory comes "
        "with the GPUs).",
    )


class Partition(Strict):
    """A partition's nodes and limits: what a launch on it is checked against."""

    gpus_per_node: int = Field(default=0, ge=0, le=MAX_GPUS_PER_NODE)
    cpus_per_node: int | None = Field(
        default=None, ge=0, le=MAX_CPUS_PER_NODE, description=CPUS_PER_NODE_ABOUT
    )
    cpus_per_gpu: int | None = Field(
        default=None, ge=1, le=MAX_CPUS_PER_NODE, description=CPUS_PER_GPU_ABOUT
    )
    cpus_by_gpu_count: dict[Annotated[int, Field(ge=1, le=MAX_GPUS_PER_NODE)], int] = Field(
        default_factory=empty_dict, description=CPUS_BY_GPU_COUNT_ABOUT
    )
    gpu: Line | None = Field(default=None, description="The GPU model, e.g. A100, H200.")
    gpu_cc: Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]{1,2}$")] | None = Field(
        default=None,
        description="The GPUs' compute capability as digits (80 for 8.0), where `gpu` is a model the tool does not know.",
    )

    @property
    def compute_capability(self) -> str | None:
        return self.gpu_cc or (GPU_CC.get(self.gpu.upper()) if self.gpu else None)

    arch: Arch | None = Field(default=None, description="The nodes' CPU architecture.")
    max_time: SlurmTime | None = Field(default=None, description="The longest job it runs.")
    default_time: SlurmTime | None = Field(
        default=None,
        description="The limit a job without --time gets (Slurm's DefaultTime), where known.",
    )
    max_nodes: int | None = Field(default=None, ge=1, description="The most nodes a job gets.")
    max_node_minutes: int | None = Field(
        default=None,
        ge=1,
        description="The most nodes x minutes a job may ask for (a QoS's node-time budget: "
        "CSCS's debug, 90: 1 node 90 min, 2 nodes 45).",
    )
    memory: Memory | None = Field(
        default=None, description="Its memory facts (the site's scheduler.memory otherwise)."
    )
    available_until: Annotated[str, AfterValidator(_day_ok)] | None = Field(
        default=None,
        description="The last day (YYYY-MM-DD) of the partition's allocation period, where the "
        "site runs it for a period: after it a launch on it is refused (warned of while the "
        "source is unconfirmed).",
    )


class Scheduler(Strict):
    """The Slurm options a site needs."""

    partition: PartitionName | None = None
    partitions: dict[PartitionName, Partition] = Field(default_factory=empty_dict)
    account: Line | None = None
    account_required: bool = Field(
        default=False,
        description="The scheduler refuses a job without --account (JSC: every job is charged "
        "to a budget; `jutil user projects` lists yours).",
    )
    account_suffix: Line | None = Field(
        default=None, description="GPU jobs are charged to <project><suffix> (Perlmutter: _g)."
    )
    qos: Line | None = None
    constraint: Line | None = None
    comment: Comment = Field(default_factory=Comment)
    gpu_request: GpuRequest = "gres"
    gpus_per_node: int = Field(default=0, ge=0, le=MAX_GPUS_PER_NODE)
    gpu: Line | None = Field(
        default=None,
        description="The GPU model of the nodes, for a site that has no partitions of its own "
        "(Perlmutter: A100); a partition's gpu wins.",
    )
    gpu_cc: Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]{1,2}$")] | None = Field(
        default=None,
        description="Their compute capability as digits (80 for 8.0), where `gpu` is a model "
        "the tool does not know.",
    )
    cpus_per_node: int | None = Field(
        default=None, ge=0, le=MAX_CPUS_PER_NODE, description=CPUS_PER_NODE_ABOUT
    )
    cpus_per_gpu: int | None = Field(
        default=None, ge=1, le=MAX_CPUS_PER_NODE, description=CPUS_PER_GPU_ABOUT
    )
    cpus_per_task: int | None = Field(default=None, ge=0)
    gpu_jobs_only: bool = Field(
        default=False,
        description="The cluster refuses jobs that ask for no GPU (ZIH's GPU clusters).",
    )
    ranks_per_node_as: Literal["ntasks-per-node", "mincpus"] = Field(
        default="ntasks-per-node",
        description="How a GPU job's allocation asks for its ranks per node: --ntasks-per-node, "
        "or --ntasks with --mincpus=ranks per node (ZIH: --ntasks-per-node is not practical "
        "in GPU jobs there).",
    )
    time: SlurmTime | None = Field(
        default=None, description="The --time the tool writes when a launch gives none."
    )
    max_time: SlurmTime | None = Field(
        default=None, description="The longest batch job (a partition's own max_time wins)."
    )
    default_time: SlurmTime | None = Field(
        default=None,
        description="The limit a job without --time gets (Slurm's DefaultTime; a partition's "
        "own default_time wins), where known.",
    )
    interactive_max_time: SlurmTime | None = Field(
        default=None, description="The longest interactive job (salloc, jupyter)."
    )
    qos_max_time: dict[Annotated[str, Field(pattern=_NAME_PATTERN)], SlurmTime] = Field(
        default_factory=empty_dict,
        description="The longest job of each QOS (--qos, or qos: above), where a site limits "
        "them by QOS (NERSC).",
    )
    memory: Memory | None = Field(
        default=None,
        description="What a job is given of a node's memory and may ask for (a partition's own "
        "memory wins); none: the tool writes no memory request of its own.",
    )
    requeue: bool = Field(
        default=False,
        description="A running batch job may requeue itself (`scontrol requeue`): --until-done "
        "goes on in the same job; false: in a new job that depends on it (say where that comes "
        "from in sources).",
    )
    max_grace: int | None = Field(
        default=None,
        ge=10,
        le=7 * 24 * 3600,
        description="Seconds: the longest warning before its time limit a job may ask for "
        "(--until-done's --grace), where the site limits it.",
    )
    srun_options: Annotated[list[Line], AfterValidator(_options_ok("srun"))] = Field(
        default_factory=empty_list
    )
    # each is a #SBATCH line of its own, which ends at the first space
    sbatch_options: Annotated[list[Line], AfterValidator(_options_ok("sbatch"))] = Field(
        default_factory=empty_list
    )

    @model_validator(mode="after")
    def _default_partition_is_listed(self) -> Scheduler:
        if self.partition and self.partitions and self.partition not in self.partitions:
            known = ", ".join(self.partitions)
            raise ValueError(
                f"partition {self.partition!r} is not in partitions (allowed: {known})"
            )
        return self

    def partition_info(self, name: str | None) -> Partition | None:
        return self.partitions.get(name) if name else None

    def gpu_model(self, partition: str | None) -> tuple[str | None, str | None]:
        """(the GPU model, its compute capability) of the partition's nodes, else the site's."""
        info = self.partition_info(partition)
        if info is not None and (info.gpu or info.gpu_cc):
            return info.gpu, info.compute_capability
        cc = self.gpu_cc or (GPU_CC.get(self.gpu.upper()) if self.gpu else None)
        return self.gpu, cc

    def cpu_cap(self, partition: str | None, gpus: int) -> tuple[int | None, str]:
        """(the most CPU cores a job asking for `gpus` GPUs on a node may have there, the
        profile key that says it): the partition's table, else cpus_per_gpu x GPUs."""
        info = self.partition_info(partition)
        key = f"scheduler.partitions.{partition}" if info is not None else "scheduler"
        if info is not None and gpus in info.cpus_by_gpu_count:
            return info.cpus_by_gpu_count[gpus], f"{key}.cpus_by_gpu_count"
        per_gpu = info.cpus_per_gpu if info is not None and info.cpus_per_gpu else None
        if per_gpu is None:
            per_gpu, key = self.cpus_per_gpu, "scheduler"
        if not per_gpu or not gpus:
            return None, f"{key}.cpus_per_gpu"
        return per_gpu * gpus, f"{key}.cpus_per_gpu"

    def memory_for(self, partition: str | None) -> tuple[Memory | None, str]:
        """(the memory facts of the partition's nodes, else the site's; the profile key)."""
        info = self.partition_info(partition)
        if info is not None and info.memory is not None:
            return info.memory, f"scheduler.partitions.{partition}.memory"
        return self.memory, "scheduler.memory"

    def default_time_for(self, partition: str | None) -> tuple[str | None, str]:
        """(the limit a job there gets without --time, the profile key that says it)."""
        info = self.partition_info(partition)
        if info is not None and info.default_time:
            return info.default_time, f"scheduler.partitions.{partition}.default_time"
        return self.default_time, "scheduler.default_time"

    def max_time_for(self, partition: str | None, interactive: bool) -> str | None:
        """The longest job Slurm takes there (the interactive limit for an interactive job)."""
        info = self.partition_info(partition)
        limits = [info.max_time if info else None, self.max_time]
        if interactive:
            limits.insert(0, self.interactive_max_time)
        return next((t for t in limits if t), None)


class ImageSignatures(Strict):
    """Whose signatures on an image the site trusts, and whether a launch needs one."""

    required: bool = Field(
        default=False,
        description="Refuse a launch whose image is not signed by one of `keys` (doctor, run "
        "and batch check it on the login node; a batch job checks the file's digest again).",
    )
    keys: Annotated[list[Line], AfterValidator(_each(guard.key_file_refusal))] = Field(
        default_factory=empty_list,
        description="Public key files (absolute paths on the cluster; OpenPGP keys for SIF "
        "files, PEM keys, cosign.pub's form, for registry images) whose signatures "
        "the site trusts; `run --keyring FILE` adds the user's own.",
    )


class Images(Strict):
    """Where a site keeps images and how their names are made."""

    dir: Line | None = None
    template: Annotated[Line, AfterValidator(_template_ok)] | None = None
    registry: Line | None = None
    cache_dir: Line | None = Field(
        default=None,
        description="Where images are unpacked for ch-run: off $HOME on sites whose home is "
        "small or slow (e.g. $SCRATCH/hvd-cache; ~ and $VARS expand); $HVD_CONTAINER_CACHE wins.",
    )
    stage_dir: Annotated[str, Field(pattern=r"^/[A-Za-z0-9_./-]*$")] = Field(
        default="/tmp",
        description="Node-local storage where --stage copies the image (sbcast): an absolute "
        "path of plain characters, the same on every node (/tmp, /dev/shm, a site's local SSD).",
    )
    not_for_work: dict[Annotated[str, Field(pattern=r"^/\S*$")], Line] = Field(
        default_factory=empty_dict,
        description="File systems the compute nodes see but the site asks not to work from "
        "(path: why): an image there is warned of.",
    )
    signatures: ImageSignatures = Field(
        default_factory=ImageSignatures,
        description="SIF signatures (`hvd-container sign`, `apptainer sign`) checked before a "
        "launch: the keys trusted, and whether one is required.",
    )


# one model per runtime module, told apart by `kind`: only the named one is built
RuntimeEntry = Annotated[RuntimeProfile, ByKind(runtimes.profile_for, runtimes.profiles)]


class Site(Strict):
    """A site profile."""

    name: Name
    runtime: RuntimeEntry
    description: Line = ""
    other_runtimes: list[RuntimeEntry] = Field(default_factory=empty_list)
    arch: Literal["amd64", "arm64", "ppc64le", "host"] = Field(
        default="amd64", description="The nodes' architecture; host: this machine's."
    )
    cluster_names: list[Line] = Field(default_factory=empty_list)
    login_host: Line | None = None
    jupyter_interface: Annotated[str, Field(pattern=_INTERFACE_PATTERN)] | None = Field(
        default=None,
        description="The compute nodes' cluster-facing interface: Jupyter listens on its address only.",
    )
    scheduler: Scheduler = Field(default_factory=Scheduler)
    mpi: MpiPlugin | None = None
    controller: ControllerName | None = Field(
        default=None,
        description="The controller launches on this site use unless the recipe or --controller names another (mpi, gloo, lightning, torch, torchrun).",
    )
    gpu_driver: Annotated[str, Field(pattern=_DRIVER_PATTERN)] | None = Field(
        default=None,
        description="The GPU nodes' NVIDIA driver: an image's CUDA must be one it runs.",
    )
    first_node_suffix: Annotated[str, Field(pattern=r"^[A-Za-z0-9-]{1,16}$")] | None = Field(
        default=None,
        description="Appended to the first node's name where torch's controllers make it the "
        "rendezvous address (MASTER_ADDR): JSC's `i`, the name of a node's InfiniBand interface, "
        "so the rendezvous runs over InfiniBand (say where that comes from in sources).",
    )
    expected_busbw: Annotated[float, Field(gt=0, le=10_000_000)] | None = Field(
        default=None,
        description="MB/s: the bus bandwidth of an all-reduce between two nodes of this site, "
        "which `--screen` compares each pair with (below half of it a pair is slow); "
        "`doctor --screen --record` writes it from a screen, with its source and date.",
    )
    nccl_finds_network: bool = Field(
        default=False,
        description="The site sets no NCCL variables: its fabric (InfiniBand) is one NCCL's own "
        "transport finds. Launches then do not ask for NCCL_SOCKET_IFNAME/NCCL_NET (say where "
        "that comes from in sources, keys: [nccl_finds_network]).",
    )
    shared_paths: Annotated[list[Line], AfterValidator(_abs_paths_ok)] = Field(
        default_factory=empty_list,
        description="Where compute nodes see the login node's files; empty: not known (then "
        "only the usual node-local places, /tmp and the like, are refused for images).",
    )
    modules: Annotated[list[Line], AfterValidator(_each(guard.module_refusal))] = Field(
        default_factory=empty_list
    )
    site_modules: list[Line] | None = Field(
        default=None,
        description="The environment modules the site offers that matter to containers "
        "(runtimes, CUDA, NCCL and its plugins, MPI), as `sites probe` lists them; "
        "`sites probe --diff` watches them. None: not recorded.",
    )
    env: Annotated[dict[EnvName, Line], AfterValidator(_env_ok)] = Field(default_factory=empty_dict)
    multi_node_env: Annotated[dict[EnvName, Line], AfterValidator(_env_ok)] = Field(
        default_factory=empty_dict,
        description="Set after env only when a launch spans nodes (-N 2 or more, or nodes "
        "left to Slurm): NCCL_NET, which on one node forces a network transport NCCL does not "
        "need there and fails where the plugin is absent; a fabric's tuning (Slingshot's "
        "FI_CXI_* for GH200).",
    )
    binds: Annotated[list[Line], AfterValidator(_binds_ok)] = Field(default_factory=empty_list)
    images: Images = Field(default_factory=Images)
    notes: list[Line] = Field(default_factory=empty_list)
    acknowledge: Annotated[list[str], AfterValidator(_check_names)] = Field(
        default_factory=empty_list,
        description="Warnings (by check name, as doctor lists them) this site's users know of "
        "and cannot act on: launches no longer print them, doctor still lists them.",
    )
    sources: list[Source] = Field(default_factory=empty_list)
    _source: str = PrivateAttr(default="")

    @property
    def source(self) -> str:
        """The file the profile was read from."""
        return self._source

    @model_validator(mode="after")
    def _sources_name_its_keys(self) -> Site:
        for source in self.sources:
            for key in source.keys:
                if key.split(".")[0] not in type(self).model_fields:
                    raise ValueError(
                        f"sources: {key!r} is not a key of the profile (it starts with one of: "
                        f"{', '.join(type(self).model_fields)})"
                    )
        return self

    def unconfirmed_source(self, *keys: str) -> tuple[str, Source] | None:
        """(the key, the source) of the first unconfirmed source that backs one of `keys`; a
        source's key backs the keys under it (scheduler.partitions.a backs its max_time)."""
        for source in self.sources:
            if source.confirmed:
                continue
            for key in keys:
                if any(key == k or key.startswith(k + ".") for k in source.keys):
                    return key, source
        return None

    @property
    def unconfirmed(self) -> list[str]:
        """The facts of the profile its sources could not confirm, one line each."""
        return [f"{s.about} ({s.where}, {s.checked})" for s in self.sources if not s.confirmed]

    def runtime_for(self, kind: str | None) -> RuntimeProfile:
        """The profile's runtime, or the one of that kind (its own settings or the defaults)."""
        if kind is None or kind == self.runtime.kind:
            return self.runtime
        for other in self.other_runtimes:
            if other.kind == kind:
                return other
        return runtimes.default_profile(kind, gpu=self.runtime.gpu)

    def arch_for(self, partition: str | None) -> str:
        info = self.scheduler.partition_info(partition)
        return info.arch if info and info.arch else self.arch

    def gpus_per_node(self, partition: str | None) -> int:
        info = self.scheduler.partition_info(partition)
        return info.gpus_per_node if info is not None else self.scheduler.gpus_per_node


def site_schema() -> dict[str, Any]:
    """The JSON Schema of a site profile file (launcher/sites/site.schema.json is its copy)."""
    schema = Site.model_json_schema()
    schema.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "hvd-container site profile",
        "description": "What a cluster needs in its srun/sbatch lines (hvd-container sites "
        "validate FILE checks it with line numbers).",
        **schema,
    }


def host_arch() -> str:
    machine = os.uname().machine.lower()
    return _MACHINE_ARCH.get(machine, machine)
