"""`hvd-container sites probe`: what a login node can tell about its site, read from the site.

Partitions, their nodes' GPUs (GRES), architecture, CPUs and time limits (`scontrol show
partition|node`), Slurm's MPI plugins and default (`srun --mpi=list`, `scontrol show config`),
the container runtimes on PATH (and Pyxis through `srun --help`), and the environment modules
that matter to containers (Lmod or Environment Modules, `-t avail`). Nothing needs root or a
job; `nodes=True` runs one short job for `uname -m` and `nvidia-smi`. Every command has a time
limit, and what could not be read is said (a TODO in the profile), never guessed.

`probe()` gathers the facts; `profile_text()` writes them as a profile (each fact with a
`probed: HOST, DATE` source); `drift()` compares them with a profile, one line per fact.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hvd_container.launcher import runtimes
from hvd_container.launcher.plan.scheduler_values import scheduler_values
from hvd_container.launcher.sites.loader import validate_site_file
from hvd_container.launcher.sites.model import (
    MPI_PLUGINS,
    PARTITION_WORDS,
    Site,
    host_arch,
    valid_partition_name,
    valid_site_name,
)
from hvd_container.launcher.slurm import slurm_megabytes, slurm_seconds

from hvd_container.core.atomic import output_file, write_output
from hvd_container.core.errors import UserError
from hvd_container.core.text import ascii_digits

# the modules that matter to containers on a GPU site
MODULE_PATTERN = re.compile(
    r"^(singularity|apptainer|cuda|cudnn|nccl|aws-ofi|ofi-nccl|openmpi|mpich|cray-mpich|"
    r"cudampi|pmix|libfabric|gpu|mpi)",
    re.IGNORECASE,
)
_MACHINE = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le"}
DEFAULT_TIMEOUT = 20.0
# what is read of a command's output: a site's tools print short lines; a longer line or
# output is cut (and said), so that every parser below stays linear in what it reads
LINE_CAP = 4096
OUTPUT_CAP = 4 << 20
MAX_GPUS = 64  # per node: more is a misreading
MAX_CPUS = 1 << 16
_PARENS = re.compile(r"\([^()]*\)")  # (S:0-1), (default): never backtracks past a paren
_GPU_TYPE = re.compile(r"[A-Za-z0-9_.+-]{1,64}")


@dataclass
class PartitionFacts:
    gpus_per_node: int | None = None
    gpu: str | None = None
    arch: str | None = None
    cpus_per_node: int | None = None
    max_time: str | None = None  # None: no limit
    default_time: str | None = None  # a job's limit without --time; None: none set
    default_mem_per_cpu: int | None = None  # megabytes (DefMemPerCPU); None: not set
    max_mem_per_node: int | None = None  # megabytes (MaxMemPerNode); None: no limit
    nodes: str = ""
    features: list[str] = field(default_factory=list)  # the nodes' features (--constraint)


@dataclass
class SiteProbe:
    """What the site said about itself, and what could not be read."""

    host: str
    date: str
    cluster: str | None = None
    default_partition: str | None = None
    partitions: dict[str, PartitionFacts] = field(default_factory=dict)
    mpi_plugins: list[str] = field(default_factory=list)
    mpi_default: str | None = None
    runtimes: dict[str, str] = field(default_factory=dict)  # kind -> version line, as found
    module_system: str | None = None
    modules: list[str] | None = None  # None: not read
    runtime_modules: dict[str, list[str]] = field(default_factory=dict)  # shifter, podman-hpc
    node_arch: str | None = None  # from the --nodes job
    node_glibc: str | None = None  # the nodes' glibc (ldd --version), from the --nodes job
    gpu_driver: str | None = None
    gpu_name: str | None = None
    unread: list[str] = field(default_factory=list)  # what could not be read, and why

    @property
    def source(self) -> str:
        return f"{self.host}, {self.date}"


def _run(
    argv: list[str],
    timeout: float,
    unread: list[str],
    *,
    both: bool = False,
    env: dict[str, str] | None = None,
) -> str | None:
    """A command's output, or None with the reason in `unread` (missing, timed out, failed)."""
    if shutil.which(argv[0]) is None and not os.path.isabs(argv[0]):
        unread.append(f"{argv[0]}: not on PATH")
        return None
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, encoding="utf-8", errors="replace",
            timeout=timeout, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        unread.append(f"{' '.join(argv)}: no answer within {timeout:g} s")
        return None
    except OSError as exc:
        unread.append(f"{' '.join(argv)}: {exc.strerror or exc}")
        return None
    if done.returncode != 0 and not both:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        unread.append(f"{' '.join(argv)}: {why[:200]}")
        return None
    return _bounded(done.stdout + (done.stderr if both else ""), " ".join(argv), unread)


def _bounded(text: str, what: str, unread: list[str]) -> str:
    """text with each line cut at LINE_CAP characters and the whole at OUTPUT_CAP."""
    cut = len(text) > OUTPUT_CAP
    lines = text[:OUTPUT_CAP].splitlines()
    long = sum(1 for line in lines if len(line) > LINE_CAP)
    if cut or long:
        unread.append(
            f"{what}: printed {'more than ' + str(OUTPUT_CAP) + ' characters' if cut else ''}"
            f"{' and ' if cut and long else ''}"
            f"{str(long) + ' lines longer than ' + str(LINE_CAP) + ' characters' if long else ''}"
            "; only the start was read"
        )
    return "\n".join(line[:LINE_CAP] for line in lines)


def _records(text: str) -> list[dict[str, str]]:
    """`scontrol show ... -o`: one KEY=VALUE record a line (words without `=` belong to the
    value before them, as in Reason=Not responding, and are not read)."""
    records = []
    for line in text.splitlines():
        pairs = (word.partition("=") for word in line.split())
        record = {key: value for key, eq, value in pairs if eq and key}
        if record:
            records.append(record)
    return records


def _count(text: str, most: int) -> int | None:
    """A count Slurm printed: ASCII digits, at most `most`; None otherwise."""
    return int(text) if ascii_digits(text) and len(text) <= 9 and int(text) <= most else None


def _gpus(gres: str) -> tuple[int, str | None]:
    """GPUs per node and their type from a node's Gres (gpu:2, gpu:a100:4(S:0-1), ...); a
    count that is not a plain number up to MAX_GPUS, or an odd type, is not taken."""
    for item in gres.split(","):
        parts = _PARENS.sub("", item).split(":")
        if parts[0] != "gpu":
            continue
        count = _count(parts[-1], MAX_GPUS) if len(parts) in (2, 3) else None
        if count is None:
            continue
        kind = parts[1] if len(parts) == 3 and _GPU_TYPE.fullmatch(parts[1]) else None
        return count, kind
    return 0, None


def _limit(value: str | None) -> str | None:
    return None if value in (None, "", "UNLIMITED", "INFINITE", "NONE") else value


def _megabytes(value: str | None) -> int | None:
    """A memory figure of `scontrol show partition` (megabytes; UNLIMITED: none)."""
    return int(value) if value and ascii_digits(value) and len(value) <= 9 else None


def _partitions(probe: SiteProbe, timeout: float) -> None:
    parts = _run(["scontrol", "show", "partition", "-o"], timeout, probe.unread)
    nodes = _run(["scontrol", "show", "node", "-o"], timeout, probe.unread)
    if parts is None:
        return
    by_partition: dict[str, list[dict[str, str]]] = {}
    for node in _records(nodes or ""):
        for name in node.get("Partitions", "").split(","):
            by_partition.setdefault(name, []).append(node)
    for record in _records(parts):
        name = record.get("PartitionName", "")
        if not name:
            continue
        if not valid_partition_name(name):
            probe.unread.append(
                f"partition {ascii(name)[:80]}: not a name a profile takes ({PARTITION_WORDS})"
            )
            continue
        if record.get("Default") == "YES":
            probe.default_partition = name
        members = by_partition.get(name, [])
        facts = PartitionFacts(
            max_time=_limit(record.get("MaxTime")),
            default_time=_limit(record.get("DefaultTime")),
            default_mem_per_cpu=_megabytes(record.get("DefMemPerCPU")),
            max_mem_per_node=_megabytes(record.get("MaxMemPerNode")),
            nodes=record.get("Nodes", ""),
        )
        if members:
            gpus = {_gpus(n.get("Gres", "")) for n in members}
            counts = {g[0] for g in gpus}
            facts.gpus_per_node = min(counts)
            types = {g[1] for g in gpus if g[1]}
            facts.gpu = types.pop() if len(types) == 1 else None
            arches = {_MACHINE.get(n.get("Arch", ""), n.get("Arch", "")) for n in members}
            facts.arch = arches.pop() if len(arches) == 1 else None
            feats = {f for n in members for f in n.get("AvailableFeatures", "").split(",")}
            facts.features = sorted(feats - {"", "(null)"})
            cpus = [_count(n.get("CPUTot", ""), MAX_CPUS) for n in members]
            known = [c for c in cpus if c is not None]
            facts.cpus_per_node = min(known) if known else None
            if len(counts) > 1:
                probe.unread.append(
                    f"partition {name}: its nodes have different GPU counts ({sorted(counts)}); the smallest is recorded"
                )
        probe.partitions[name] = facts


def _mpi(probe: SiteProbe, timeout: float) -> None:
    listed = _run(["srun", "--mpi=list"], timeout, probe.unread, both=True)
    if listed is not None:
        words = []
        for line in listed.splitlines():
            word = line.strip().removeprefix("srun:").strip()
            if _PLUGIN.fullmatch(word):
                words.append(word)
        probe.mpi_plugins = [w for w in dict.fromkeys(words) if w not in ("srun",)]
        versions = re.findall(r"\b(pmix_v\d+)\b", listed)
        probe.mpi_plugins += [v for v in dict.fromkeys(versions) if v not in probe.mpi_plugins]
    config = _run(["scontrol", "show", "config"], timeout, probe.unread)
    if config is not None:
        match = re.search(r"^MpiDefault\s*=\s*(\S+)", config, re.M)
        probe.mpi_default = match[1] if match else None
        cluster = re.search(r"^ClusterName\s*=\s*(\S+)", config, re.M)
        probe.cluster = cluster[1] if cluster else None


_PLUGIN = re.compile(r"[a-z][a-z0-9_]{0,31}")


def _runtimes(probe: SiteProbe, timeout: float) -> None:
    """Each runtime's program on PATH (and its version line), or its option in srun --help."""
    help_text: str | None = None
    for kind, cls in runtimes.findable():
        program = cls.programs.get(kind)
        if program is not None:
            if shutil.which(program) is not None:
                probe.runtimes[kind] = _version(program, timeout)
            continue
        if help_text is None:
            help_text = _run(["srun", "--help"], timeout, [], both=True) or ""
        if cls.srun_option and cls.srun_option in help_text:
            probe.runtimes[kind] = f"srun {cls.srun_option}"


def _runtime_env() -> dict[str, str]:
    # ch-run and podman-hpc insist on $USER, which a batch job or a cron job may lack
    return {**os.environ, "USER": os.environ.get("USER") or "nobody"}


def _version(program: str, timeout: float) -> str:
    text = _run([program, "--version"], timeout, [], both=True, env=_runtime_env())
    if text is None:
        return "found (no version within the time limit)"
    lines = text.strip().splitlines()
    first = lines[0][:80] if lines else ""
    # podman-hpc has no --version of its own: it prints its usage
    return first if first and "usage" not in first.lower() else "found"


def _modules(probe: SiteProbe, timeout: float) -> None:
    """`module -t avail` through Lmod's or Environment Modules' command (the shell function
    `module` is the login shell's); the list goes to stderr in both."""
    lmod = os.environ.get("LMOD_CMD")
    home = os.environ.get("MODULESHOME")
    if lmod:
        argv, probe.module_system = [lmod, "bash", "-t", "avail"], "lmod"
    elif home and os.path.exists(os.path.join(home, "libexec", "modulecmd.tcl")):
        argv = ["tclsh", os.path.join(home, "libexec", "modulecmd.tcl"), "bash", "-t", "avail"]
        probe.module_system = "environment-modules"
    else:
        probe.unread.append("environment modules: neither $LMOD_CMD nor $MODULESHOME is set")
        return
    text = _run(argv, timeout, probe.unread, both=True)
    if text is None:
        return
    names = []
    for line in text.splitlines():
        line = _PARENS.sub("", line).strip()  # (default), (D), (L)
        if not line or line.endswith((":", "/")) or " " in line or line.startswith("-"):
            continue
        if MODULE_PATTERN.match(line):
            names.append(line)
    probe.modules = sorted(dict.fromkeys(names))


def _runtime_modules(probe: SiteProbe, timeout: float) -> None:
    """The modules of the runtimes found that have their own (Shifter, podman-hpc), each
    runtime reading them in its own file."""
    for kind, cls in runtimes.findable():
        if kind not in probe.runtimes:
            continue
        why: list[str] = []

        def run(argv: list[str], why: list[str] = why) -> str | None:
            return _run(argv, timeout, why, env=_runtime_env())

        found = cls.probe_modules(run)
        if isinstance(found, str):
            why.append(found)
        elif found is not None:
            probe.runtime_modules[kind] = found
        probe.unread += [f"{kind}'s modules: {line}" for line in why]


# One line each, labelled: a node without a GPU or without ldd leaves its line out
NODE_SCRIPT = (
    'echo "arch $(uname -m)"; echo "glibc $(ldd --version 2>/dev/null | head -n 1)"; '
    "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null "
    "| head -n 1 | sed 's/^/gpu /'"
)


def _nodes(probe: SiteProbe, timeout: float) -> None:
    """One short job on the default partition: the nodes' architecture, glibc and GPUs."""
    argv = ["srun", "-N", "1", "-n", "1", "--time=2", "--quiet", "sh", "-c", NODE_SCRIPT]
    text = _run(argv, max(timeout, 120.0), probe.unread)
    if text is not None:
        read_node_lines(probe, text)


def read_node_lines(probe: SiteProbe, text: str) -> None:
    """What NODE_SCRIPT printed: `arch MACHINE`, `glibc <ldd's first line>`, `gpu NAME, DRIVER`."""
    for line in text.splitlines():
        label, _, value = line.strip().partition(" ")
        value = value.strip()
        if label == "arch" and value:
            probe.node_arch = _MACHINE.get(value, value)
        elif label == "glibc":
            # "ldd (GNU libc) 2.31", "ldd (Debian GLIBC 2.36-9+deb12u4) 2.36"
            found = re.search(r"\b(\d+\.\d+)\s*$", value)
            probe.node_glibc = found[1] if found else None
        elif label == "gpu" and "," in value:
            name, driver = (p.strip() for p in value.split(",", 1))
            probe.gpu_name, probe.gpu_driver = name, driver


def probe(*, nodes: bool = False, timeout: float = DEFAULT_TIMEOUT) -> SiteProbe:
    """Read the site from the login node this runs on."""
    found = SiteProbe(host=socket.gethostname(), date=datetime.date.today().isoformat())
    _partitions(found, timeout)
    _mpi(found, timeout)
    _runtimes(found, timeout)
    _modules(found, timeout)
    _runtime_modules(found, timeout)
    if nodes:
        _nodes(found, timeout)
    return found


def nothing_read(found: SiteProbe) -> str | None:
    """Why the probe has no site to describe (Slurm reported no partition here), or None."""
    if found.partitions:
        return None
    why = next(
        (u for u in found.unread if u.startswith(("scontrol", "sinfo"))),
        "it reported no partition",
    )
    return (
        f"sites probe: no Slurm answered here ({why}): run it on the site's login node, where "
        "scontrol lists the partitions"
    )


# ------------------------------------------------------------------------- a new profile


def _partition_entry(facts: PartitionFacts) -> dict[str, object]:
    entry: dict[str, object] = {"gpus_per_node": facts.gpus_per_node or 0}
    for key in ("gpu", "arch", "cpus_per_node", "max_time", "default_time"):
        value = getattr(facts, key)
        if value is not None:
            entry[key] = value
    memory = {
        key: f"{value}M"
        for key, value in (
            ("per_node", facts.max_mem_per_node), ("default_per_cpu", facts.default_mem_per_cpu)
        )
        if value is not None
    }  # fmt: skip
    if memory:
        entry["memory"] = memory
    return entry


def profile_data(found: SiteProbe, name: str) -> tuple[dict[str, object], list[str]]:
    """(the profile as data, TODO lines for what the probe could not tell)."""
    todo = list(found.unread)
    default = found.partitions.get(found.default_partition or "")
    arch = (default.arch if default else None) or found.node_arch or host_arch()
    gpus = (default.gpus_per_node or 0) if default else 0
    scheduler: dict[str, object] = {}
    if found.default_partition:
        scheduler["partition"] = found.default_partition
    if found.partitions:
        scheduler["partitions"] = {n: _partition_entry(f) for n, f in found.partitions.items()}
    else:
        todo.append("scheduler.partitions: none read")
    any_gpus = any((f.gpus_per_node or 0) > 0 for f in found.partitions.values())
    scheduler["gpu_request"] = "gres" if any_gpus else "none"
    scheduler["gpus_per_node"] = gpus
    if default and default.cpus_per_node:
        scheduler["cpus_per_node"] = default.cpus_per_node
    entries = [
        cls.probed_entry(kind, any_gpus)
        for kind, cls in runtimes.findable()
        if kind in found.runtimes
    ]
    if not entries:
        entries = [{"kind": "none", "gpu": any_gpus}]
        todo.append(
            "runtime: no container runtime found (apptainer, singularity, shifter, ch-run, podman-hpc, srun --container-image)"
        )
    if len(entries) > 1:
        others = ", ".join(str(e["kind"]) for e in entries[1:])
        todo.append(
            f"other_runtimes ({others}): the flags, modules and binds they need here are not read"
        )
    data: dict[str, object] = {
        "name": name,
        "description": f"probed on {found.host}"
        + (f" (Slurm cluster {found.cluster})" if found.cluster else ""),
        "arch": arch,
    }
    if found.cluster:
        data["cluster_names"] = [found.cluster]
    data["scheduler"] = scheduler
    # the site's default as it is (none included): the launch picks the plugin an image's MPI
    # speaks when the default is not one of them
    data["mpi"] = found.mpi_default if found.mpi_default in MPI_PLUGINS else None
    if found.mpi_default and found.mpi_default not in MPI_PLUGINS:
        todo.append(
            f"mpi: Slurm's default {found.mpi_default!r} is not one hvd-container knows (allowed: {', '.join(MPI_PLUGINS)})"
        )
    if found.gpu_driver:
        data["gpu_driver"] = found.gpu_driver
    data["runtime"] = entries[0]
    if entries[1:]:
        data["other_runtimes"] = entries[1:]
    if found.modules is not None:
        data["site_modules"] = found.modules
    if not any_gpus:
        todo.append(
            "GPUs: no partition reports GRES gpu (a site that asks for GPUs another way: set scheduler.gpu_request)"
        )
    for kind, names in found.runtime_modules.items():
        todo.append(
            f"{kind}'s modules here: {', '.join(names) or 'none'} (name those the site's GPUs and MPI need in the runtime entry)"
        )
    if found.node_glibc:
        todo.append(
            f"runtime.injects_glibc: the nodes' glibc is {found.node_glibc} (ldd --version on a node): set it on a runtime that injects the host's libraries (Shifter's and podman-hpc's modules)"
        )
    for name, facts in found.partitions.items():
        if facts.features:
            todo.append(
                f"partition {name}: node features {', '.join(facts.features)} (scheduler.constraint picks them)"
            )
    todo.append("shared_paths: where the compute nodes see this machine's files is not probed")
    data["sources"] = _sources(found)
    return data, todo


def _sources(found: SiteProbe) -> list[dict[str, object]]:
    read = [
        (found.partitions, "partitions, their GPUs, architecture, CPUs and time limits (scontrol show partition, scontrol show node)"),
        (found.mpi_plugins, f"Slurm's MPI plugins {', '.join(found.mpi_plugins)}; default {found.mpi_default} (srun --mpi=list, scontrol show config)"),
        (found.runtimes, "the container runtimes: " + ", ".join(f"{k} ({v})" for k, v in found.runtimes.items())),
        (found.modules is not None, f"the modules that matter to containers ({found.module_system} -t avail)"),
        (found.node_arch, f"a node's architecture {found.node_arch}, glibc {found.node_glibc or 'not read'} and GPU {found.gpu_name or 'none'} (one job: uname -m, ldd --version, nvidia-smi)"),
    ]  # fmt: skip
    return [
        {"about": about[:400], "probed": found.source, "checked": found.date}
        for ok, about in read
        if ok
    ]


def profile_text(found: SiteProbe, name: str) -> str:
    """The probed profile as YAML: a header, TODO comments, the data."""
    data, todo = profile_data(found, name)
    head = [
        "# yaml-language-server: $schema=site.schema.json",
        f"# Written by `hvd-container sites probe` on {found.host} on {found.date}: what the site",
        "# said about itself. Check it with `hvd-container sites validate FILE`; compare it with",
        "# the site later with `hvd-container sites probe --diff FILE`.",
    ]
    head += [f"# TODO: {_one_line(t)}" for t in todo]
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, allow_unicode=False)
    return "\n".join(head) + "\n" + body


def _one_line(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


# -------------------------------------------------------------------------------- drift


def _show(value: object) -> str:
    if value is None:
        return "(absent)"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


def _same_time(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    return slurm_seconds(a) == slurm_seconds(b)


def drift(site: Site, found: SiteProbe) -> list[str]:
    """One line per fact of `site` that the site itself now says otherwise:
    `key: profile value → probed value`. Facts the probe could not read are not compared."""
    lines: list[str] = []
    sched = site.scheduler

    def differ(key: str, have: object, probed: object) -> None:
        lines.append(f"{key}: {_show(have)} → {_show(probed)}")

    if found.partitions:
        default = scheduler_values(site).partition  # the profile's own
        if default and default not in found.partitions:
            differ(
                "scheduler.partition",
                default,
                f"not a partition (default {found.default_partition})",
            )
        for name in sorted(set(sched.partitions) | set(found.partitions)):
            have, probed = sched.partitions.get(name), found.partitions.get(name)
            key = f"scheduler.partitions.{name}"
            if have is None and probed is not None:
                differ(key, None, _partition_entry(probed))
                continue
            if probed is None:
                differ(key, have.model_dump(exclude_none=True) if have else None, None)
                continue
            assert have is not None
            if probed.gpus_per_node is not None and have.gpus_per_node != probed.gpus_per_node:
                differ(f"{key}.gpus_per_node", have.gpus_per_node, probed.gpus_per_node)
            if have.gpu is not None and probed.gpu is not None and have.gpu != probed.gpu:
                differ(f"{key}.gpu", have.gpu, probed.gpu)
            arch = site.arch_for(name)
            if probed.arch is not None and arch != probed.arch:
                differ(f"{key}.arch", arch, probed.arch)
            if have.cpus_per_node is not None and probed.cpus_per_node not in (
                None,
                have.cpus_per_node,
            ):
                differ(f"{key}.cpus_per_node", have.cpus_per_node, probed.cpus_per_node)
            if not _same_time(have.max_time, probed.max_time):
                differ(f"{key}.max_time", have.max_time, probed.max_time or "no limit")
            if probed.default_time and not _same_time(have.default_time, probed.default_time):
                differ(f"{key}.default_time", have.default_time, probed.default_time)
            memory, memory_key = sched.memory_for(name)
            for field, value in (
                ("default_per_cpu", probed.default_mem_per_cpu),
                ("per_node", probed.max_mem_per_node),
            ):
                said = getattr(memory, field) if memory is not None else None
                if value is not None and (said is None or slurm_megabytes(said) != value):
                    differ(f"{memory_key}.{field}", said, f"{value}M")
    if found.mpi_plugins and site.mpi and site.mpi not in found.mpi_plugins:
        differ("mpi", site.mpi, f"not among srun's plugins ({', '.join(found.mpi_plugins)})")
    findable = dict(runtimes.findable())
    for entry in [site.runtime, *site.other_runtimes]:
        cls = findable.get(entry.kind)
        if cls is not None and entry.kind not in found.runtimes:
            where = cls.programs.get(entry.kind) or f"srun {cls.srun_option}"
            differ(f"runtime {entry.kind}", where, "not found")
    if found.modules is not None:
        available = set(found.modules)
        if site.site_modules is not None:
            for gone in sorted(set(site.site_modules) - available):
                differ("site_modules", gone, None)
            for new in sorted(available - set(site.site_modules)):
                differ("site_modules", None, new)
        for loaded in site.modules:
            if loaded not in available and MODULE_PATTERN.match(loaded):
                differ("modules", loaded, "not available")
    if found.gpu_driver and site.gpu_driver and not found.gpu_driver.startswith(site.gpu_driver):
        differ("gpu_driver", site.gpu_driver, found.gpu_driver)
    if found.node_glibc:
        for entry in [site.runtime, *site.other_runtimes]:
            if entry.injects_glibc and entry.injects_glibc != found.node_glibc:
                differ(
                    f"runtime {entry.kind}: injects_glibc", entry.injects_glibc, found.node_glibc
                )
    return lines


def checked_profile_text(found: SiteProbe, name: str) -> tuple[str, Site]:
    """The probed profile's text and the profile, once `sites validate` accepts it: every
    value the site printed is held to what a profile takes."""
    text = profile_text(found, name)
    with tempfile.TemporaryDirectory(prefix="hvd-probe-") as tmp:
        trial = Path(tmp) / f"{name}.yaml"
        trial.write_text(text)
        site = validate_site_file(trial)
    return text, site


def profile_target(target: str) -> Path:
    """-o's file, checked before the probe runs (with --nodes it waits for a job): NAME.yaml,
    NAME the site's, in a directory that exists."""
    path = Path(target)
    if not valid_site_name(path.stem) or path.suffix not in (".yaml", ".yml"):
        raise UserError(
            f"-o {target}: the file's name is the site's name: NAME.yaml with lower-case letters, digits and . _ - (e.g. -o mysite.yaml)"
        )
    return output_file(path, "-o")


def write_profile(found: SiteProbe, target: str) -> Site:
    """Write the probed profile to `target` (its name is the file's), only once `sites
    validate` accepts it: a probe of a site that says something odd leaves no file."""
    text, site = checked_profile_text(found, profile_target(target).stem)
    write_output(target, "-o", text)
    return site
