"""The one guard: what a value from a site profile or a pass-through flag may be where it
crosses into an srun/sbatch/salloc line, a step's environment, a bind or a runtime's command
line. `sites validate`, `doctor`, `run` and `batch` all ask these rules.

Each rule allows what is known and returns a Refusal (why, naming what is allowed) for anything
else, or None. A refusal is `trustable` when a profile the user has trusted (`hvd-container
sites trust FILE`) or a built-in one may still set it: a site's real NCCL plugin path, a bind
under /opt. What the tool sets itself (the rendezvous, an option it has a checked flag for) and
what cannot be read as one option are never trustable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from hvd_container.launcher.plan.binds import parse_bind, split_binds
from hvd_container.launcher.slurm_option_table import OPTIONS, SLURM_VERSION


@dataclass(frozen=True)
class Refusal:
    why: str
    trustable: bool = True

    def __str__(self) -> str:
        return self.why


# what a profile's validators read from pydantic's context: whether the files it came from are
# built in or trusted, and where `sites trust` collects what it would allow
TRUSTED = "guard.trusted"
FINDINGS = "guard.findings"


def judge(refusal: Refusal | None, info: Any) -> None:
    """Raise ValueError for a refusal, unless it is trustable and the profile is trusted (then
    note it for `sites trust`). info: pydantic's ValidationInfo."""
    if refusal is None:
        return
    context = getattr(info, "context", None) or {}
    if refusal.trustable and context.get(TRUSTED):
        found = context.get(FINDINGS)
        if found is not None:
            found.append(f"{getattr(info, 'field_name', '')}: {refusal.why.split(' (allowed')[0]}")
        return
    raise ValueError(refusal.why)


# --- scheduler options: read as Slurm reads them ------------------------------------------


class SlurmOption(NamedTuple):
    name: str  # the long name Slurm resolves it to
    value: str | None
    took_next: bool  # its value is the next word (`--nodelist n1`, `-w n1`)


class NotAnOption(ValueError):
    """What srun/sbatch/salloc's getopt_long would stop at, said in words."""


def _table(command: str) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """{long name: argument}, {short letter: (long name, argument)} for one command."""
    longs, shorts = {}, {}
    for name, arg, short, commands in OPTIONS:
        if command in commands.split():
            longs[name] = arg
            if short:
                shorts[short] = (name, arg)
    return longs, shorts


_TABLES = {c: _table(c) for c in ("srun", "sbatch", "salloc")}


def read_slurm_options(words: list[str], command: str) -> tuple[list[SlurmOption], int]:
    """The options `command` reads from words, and the index of the first word it does not
    read as one (its program, for srun). This is getopt_long as Slurm calls it (optstring "+":
    the first non-option ends the options; "--" too): an unambiguous abbreviation names a long
    option, short options bundle (`-vEo x` is -v -E -o x), a required value is the rest of the
    word or else the next word, an optional one only the rest (`-k0`, `--exclusive=user`)."""
    longs, shorts = _TABLES[command]
    out: list[SlurmOption] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return out, i + 1
        if word.startswith("--"):
            spelled, eq, attached = word[2:].partition("=")
            name = _long_name(spelled, longs, command)
            arg = longs[name]
            if arg == "none" and eq:
                raise NotAnOption(f"{command} --{name} takes no value ({word!r})")
            if arg == "required" and not eq:
                if i + 1 >= len(words):
                    raise NotAnOption(f"{command} --{name} needs a value ({word!r})")
                out.append(SlurmOption(name, words[i + 1], True))
                i += 2
                continue
            out.append(SlurmOption(name, attached if eq else None, False))
            i += 1
            continue
        if not word.startswith("-") or word == "-":
            return out, i
        i += 1
        for at, letter in enumerate(word[1:], start=1):
            if letter not in shorts:
                raise NotAnOption(f"{command} has no option -{letter} ({word!r})")
            name, arg = shorts[letter]
            rest = word[at + 1 :]
            if arg == "none":
                out.append(SlurmOption(name, None, False))
                continue
            if arg == "optional" or rest:
                out.append(SlurmOption(name, rest or None, False))
            elif i < len(words):
                out.append(SlurmOption(name, words[i], True))
                i += 1
            else:
                raise NotAnOption(f"{command} -{letter} (--{name}) needs a value ({word!r})")
            break
    return out, i


def _long_name(spelled: str, longs: dict[str, str], command: str) -> str:
    if spelled in longs:
        return spelled
    hits = sorted({n for n in longs if spelled and n.startswith(spelled)})
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise NotAnOption(f"{command} has no option --{spelled}")
    raise NotAnOption(
        f"--{spelled} is ambiguous to {command} ({', '.join('--' + h for h in hits)})"
    )


# What a profile's srun_options/sbatch_options and --srun-option/--sbatch-option may hold:
# resources, placement, binding, notification and accounting. None of them names a program, a
# file, the job's folder, output or environment (srun(1), sbatch(1) of the Slurm above).
PLACEMENT_OPTIONS = frozenset(
    {
        "accel-bind", "acctg-freq", "begin", "cluster-constraint", "contiguous", "core-spec",
        "cores-per-socket", "cpu-bind", "cpu-freq", "cpus-per-gpu", "deadline", "delay-boot",
        "dependency", "distribution", "exact", "exclude", "exclusive", "extra",
        "extra-node-info", "gpu-bind", "gpu-freq", "gpus", "gpus-per-socket", "gres",
        "gres-flags", "hint", "hold", "immediate", "kill-on-bad-exit", "label", "licenses",
        "mail-type", "mail-user", "mem-bind", "mincpus",
        "network", "nice", "nodelist", "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-socket",
        "oom-kill-step", "overcommit", "overlap", "oversubscribe", "prefer", "priority",
        "profile", "propagate", "quiet", "reservation", "resv-ports", "segment", "signal",
        "sockets-per-node", "spread-job", "switches", "thread-spec", "threads",
        "threads-per-core", "time-min", "tmp", "tres-bind", "tres-per-task", "unbuffered",
        "use-min-nodes", "verbose", "wckey", "whole",
    }
)  # fmt: skip
PLACEMENT_WORDS = (
    "options on resources and placement: --exclusive, --gres=..., --reservation, "
    "--mail-type, --hint, --cpu-bind, ... (never a program, a file, the job's folder, output "
    "or environment)"
)
# what the tool sets from flags of its own, and where a user says it
TOOL_OPTIONS = {
    "nodes": "-N/--nodes", "ntasks": "-n/--ntasks", "ntasks-per-node": "--ntasks-per-node",
    "tasks-per-node": "--ntasks-per-node", "gpus-per-node": "--gpus-per-node",
    "gpus-per-task": "--gpus-per-task", "cpus-per-task": "-c/--cpus-per-task",
    "job-name": "-J/--job-name", "time": "-t/--time", "partition": "-p/--partition",
    "account": "-A/--account", "qos": "-q/--qos", "constraint": "-C/--constraint",
    "comment": "--comment", "requeue": "--requeue", "no-requeue": "--requeue", "mpi": "--mpi",
    "output": "--job-output", "error": "--job-error", "no-kill": "--screen",
    "mem": "--mem (a profile: scheduler.memory)",
    "mem-per-gpu": "--mem-per-gpu (a profile: scheduler.memory)",
    "mem-per-cpu": "--mem or --mem-per-gpu (a profile: scheduler.memory)",
}  # fmt: skip
# a profile may also name the site's PMI plugin (srun --mpi=pmix): a name from Slurm's list
PROFILE_OPTIONS = PLACEMENT_OPTIONS | {"mpi"}
TRUST_HINT = "a profile you trust may: hvd-container sites trust FILE"


def slurm_entry_refusal(entry: str, command: str, *, profile: bool = True) -> Refusal | None:
    """Why one entry of srun_options/sbatch_options (profile) or one --srun-option/
    --sbatch-option value (not profile) is refused, or None. The entry is read alone, as
    getopt_long reads it on the command's line: it must be whole options, each one allowed."""
    if not entry.startswith("-") or entry.strip("-") == "":
        return Refusal(f"{entry!r}: give one option, such as --exclusive or --mail-type=END", False)
    try:
        # a word after it: an option that takes a value from the next word shows itself
        read, end = read_slurm_options([entry, "WORD"], command)
    except NotAnOption as exc:
        return Refusal(f"{entry!r}: {exc} (Slurm {SLURM_VERSION})", False)
    taken = next((o for o in read if o.took_next), None)
    if taken is not None:
        return Refusal(f"{entry!r}: --{taken.name} takes a value: write --{taken.name}=VALUE", False)  # fmt: skip
    if end != 1 or not read:
        return Refusal(f"{entry!r}: give one option, such as --exclusive or --mail-type=END", False)
    for option in read:
        if option.name in (PROFILE_OPTIONS if profile else PLACEMENT_OPTIONS):
            continue
        mine = TOOL_OPTIONS.get(option.name)
        if mine is not None:
            return Refusal(f"{entry!r}: --{option.name} is set by the tool: use its {mine}", False)
        return Refusal(
            f"{entry!r}: {command} reads --{option.name}, which is not allowed here "
            f"(allowed: {PLACEMENT_WORDS}{'; ' + TRUST_HINT if profile else ''})",
            trustable=profile,
        )
    return None


# --- environment variables -----------------------------------------------------------------

# Variables allowed by name: each only tunes a library or the interpreter (thread counts,
# devices, logging, offline switches); none names a file, a folder, a library or a program.
ENV_NAMES = frozenset(
    {
        "OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "OMP_STACKSIZE", "OMP_WAIT_POLICY",
        "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
        "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "TORCH_DISTRIBUTED_DEBUG",
        "TORCH_CPP_LOG_LEVEL", "TORCH_SHOW_CPP_STACKTRACES", "TORCH_LOGS",
        "PYTHONUNBUFFERED", "PYTHONFAULTHANDLER", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONNOUSERSITE",
        "TF_CPP_MIN_LOG_LEVEL", "TF_FORCE_GPU_ALLOW_GROWTH", "TF_ENABLE_ONEDNN_OPTS",
        "TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE",
        "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
        "SLURM_CPU_BIND", "SLURM_MEM_BIND", "SLURM_GPU_BIND", "SLURM_DISTRIBUTION",
        "SLURM_HINT", "SLURM_EXACT", "SLURM_OVERLAP", "SLURM_NETWORK",
        "LANG", "LC_ALL", "TZ",
    }
)  # fmt: skip
# Families allowed by pattern. Each library below reads its variables as numbers, switches,
# interface, transport or component names; the only ones through which it loads or writes
# anything name a file, folder, library, plugin or program, and a name with one of FILE_WORDS
# is not of the pattern (NCCL_NET_PLUGIN, NCCL_TOPO_FILE, FI_PROVIDER_PATH, UCX_MODULE_DIR,
# CUDA_CACHE_PATH, OMPI_MCA_mca_base_component_path, OMPI_MCA_plm_rsh_agent, HOROVOD_TIMELINE).
ENV_FAMILIES = {
    "NCCL_": "NCCL's tuning (NCCL_SOCKET_IFNAME, NCCL_NET, NCCL_IB_HCA, NCCL_PROTO, ...)",
    "TORCH_NCCL_": "torch's NCCL process group switches",
    "FI_": "libfabric's provider tuning (FI_PROVIDER, FI_CXI_*, FI_MR_CACHE_MONITOR)",
    "UCX_": "UCX's transport tuning (UCX_TLS, UCX_NET_DEVICES)",
    "CUDA_": "CUDA's device switches (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_MAX_CONNECTIONS)",
    "MPICH_": "Cray MPICH's switches (MPICH_GPU_SUPPORT_ENABLED, MPICH_OFI_NIC_POLICY)",
    "HOROVOD_": "Horovod's tuning (HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME)",
    "OMPI_MCA_btl_": "Open MPI's byte transfer layers, chosen by name among the image's",
    "OMPI_MCA_pml_": "Open MPI's point-to-point layers",
    "OMPI_MCA_mtl_": "Open MPI's matching transports",
    "OMPI_MCA_coll_": "Open MPI's collectives",
    "OMPI_MCA_osc_": "Open MPI's one-sided layers",
    "PMIX_MCA_gds_": "PMIx's data store, chosen by name",
    "PMIX_MCA_psec_": "PMIx's security component, chosen by name",
    "PMIX_MCA_ptl_": "PMIx's transport, chosen by name",
}
FILE_WORDS = frozenset(
    {
        "PATH", "PATHS", "DIR", "DIRS", "FILE", "FILES", "FILENAME", "PLUGIN", "PLUGINS",
        "LIB", "LIBS", "LIBRARY", "PRELOAD", "MODULE", "MODULES", "COMPONENT", "COMPONENTS",
        "AGENT", "EXEC", "LAUNCHER", "BOOTSTRAP", "PROGRAM", "PROG", "CMD", "COMMAND",
        "SCRIPT", "CONF", "CONFIG", "HOME", "PREFIX", "ROOT", "INIT", "TIMELINE",
        "PARAM", "DUMP", "OUTPUT", "TMPDIR",
    }
)  # fmt: skip
# where the ranks meet: the controllers set these for each launch, nobody else
RENDEZVOUS_VARS = frozenset(
    {
        "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK",
        "LOCAL_WORLD_SIZE", "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT",
        "HOROVOD_HOSTNAME", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK",
        "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HVD_GLOO_DIR",
    }
)  # fmt: skip
# a runtime passes NAME into the container under these prefixes: NAME's rule applies
FORWARDED_PREFIXES = ("APPTAINERENV_", "SINGULARITYENV_")
ENV_WORDS = (
    "variables that only tune: " + ", ".join(sorted(p + "*" for p in ENV_FAMILIES))
    + " (no name naming a file, folder, plugin or program), OMP_NUM_THREADS and the like"
)  # fmt: skip


def env_allowed(name: str) -> bool:
    """Is `name` a variable that cannot choose the code a step runs? (See ENV_FAMILIES.)"""
    if name in ENV_NAMES:
        return True
    family = next((p for p in ENV_FAMILIES if (name + "_").startswith(p)), None)
    if family is None or name in RENDEZVOUS_VARS:
        return False
    words = set(name[len(family) :].upper().split("_")) | set(family.rstrip("_").split("_"))
    # a name ending in _LOG is a log file (HOROVOD_AUTOTUNE_LOG); _LOG_LEVEL is a level
    return not words & FILE_WORDS and not name.upper().endswith("_LOG")


def env_refusal(name: str) -> Refusal | None:
    """Why a profile's env:/multi_node_env: may not set `name`, or None."""
    for prefix in FORWARDED_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            inner = env_refusal(name[len(prefix) :])
            return (
                Refusal(f"{prefix} passes it on: {inner.why}", inner.trustable) if inner else None
            )
    if name in RENDEZVOUS_VARS:
        return Refusal("the launch sets where its ranks meet; a profile cannot", False)
    if env_allowed(name):
        return None
    return Refusal(f"not a variable a profile may set (allowed: {ENV_WORDS}; {TRUST_HINT})")


# --- binds -----------------------------------------------------------------------------------

# the image's program folders: a bind over one of them, inside one or above one replaces what
# runs (its python, its libraries, ld.so.preload)
PROGRAM_DIRS = (
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc", "/opt",
    "/.singularity.d", "/.exec", "/.run", "/.shell", "/environment", "/singularity",
)  # fmt: skip
BIND_WORDS = (
    "a folder of data, outside the image's program folders (/usr, /bin, /lib*, /etc, /opt) "
    "and not /"
)


def bind_refusal(source: str, dest: str) -> Refusal | None:
    """Why a profile may not bind source onto dest in the container, or None."""
    if source.startswith("/") and os.path.normpath(source) in ("/", "//"):
        return Refusal(
            f"binds the whole host file system (/) (allowed: {BIND_WORDS}; {TRUST_HINT})"
        )
    if not dest.startswith("/"):
        return None  # ~ or $VAR: the user's own folders, expanded where the job runs
    where = os.path.normpath(dest).replace("//", "/")
    for folder in PROGRAM_DIRS:
        if where == "/" or where == folder or where.startswith(folder + "/"):
            return Refusal(
                f"covers {where} of the image, where its programs live (allowed: {BIND_WORDS}; "
                f"{TRUST_HINT})"
            )
    return None


# --- trusted signing keys ------------------------------------------------------------------

KEY_SUFFIXES = (".asc", ".gpg", ".pgp", ".pub", ".key", ".pem")
_KEY_PATH = re.compile(r"/[A-Za-z0-9_.+@=-]+(/[A-Za-z0-9_.+@=-]+)*")


def key_file_refusal(path: str) -> str | None:
    """Why a profile may not name `path` as a trusted public key file (OpenPGP, or PEM for
    registry images), or None: an
    absolute path of plain characters, no `..`, ending in a key file's suffix."""
    allowed = (
        "allowed: an absolute path of letters, digits and _ . + @ = - ending in "
        f"{', '.join(KEY_SUFFIXES)}"
    )
    if not _KEY_PATH.fullmatch(path) or "/../" in f"{path}/" or not path.endswith(KEY_SUFFIXES):
        return f"not a key file path ({allowed})"
    return None


# --- a runtime's own flags ------------------------------------------------------------------


class Flag(NamedTuple):
    takes: str  # "none", "value" (its value after = or the next word) or "bind"
    short: str = ""  # its one-letter form, if any


def runtime_flags_refusal(flags: list[str], known: dict[str, Flag], runtime: str) -> Refusal | None:
    """Why a runtime's `flags:` are refused, or None: each is one of the runtime's own known
    options, spelled in full (a bundle or an abbreviation is refused, whatever the runtime
    would make of it), and a bind's value is judged as a bind. Every flag is judged: what no
    trust allows (a word that is no option, a value missing) wins over what trust may allow."""
    found = list(_flag_refusals(flags, known, runtime))
    return next((r for r in found if not r.trustable), found[0] if found else None)


def _flag_refusals(flags: list[str], known: dict[str, Flag], runtime: str) -> Iterator[Refusal]:
    by_short = {f.short: (name, f) for name, f in known.items() if f.short}
    allowed = ", ".join(sorted(known)) or "none"
    i = 0
    while i < len(flags):
        word = flags[i]
        name, eq, value = word.partition("=")
        i += 1
        if not word.startswith("-") or word.strip("-") == "":
            yield Refusal(
                f"{word!r}: not an option (flags hold options only; an option this tool does "
                "not know gives its value after =)",
                False,
            )
            continue
        spec = known.get(name) if word.startswith("--") else None
        if spec is None and not word.startswith("--") and len(name) == 2 and name in by_short:
            name, spec = by_short[name]
        if spec is None:
            yield Refusal(
                f"{word!r}: not an option of {runtime} this tool knows (allowed: {allowed}; "
                f"{TRUST_HINT})"
            )
            continue
        if spec.takes == "none":
            if eq:
                yield Refusal(f"{word!r}: {name} takes no value", False)
            continue
        if not eq:
            if i >= len(flags):
                yield Refusal(f"{word!r}: {name} needs a value", False)
                continue
            value, i = flags[i], i + 1
        if spec.takes == "bind":
            why = _bind_value_refusal(value)
            if why is not None:
                yield Refusal(f"{word!r} {value!r}: {why.why}", why.trustable)


def _bind_value_refusal(value: str) -> Refusal | None:
    for one in split_binds(value):
        parsed = parse_bind(one, allow_unexpanded=True)
        if isinstance(parsed, str):
            return Refusal(parsed, False)
        why = bind_refusal(parsed.source, parsed.dest)
        if why is not None:
            return why
    return None


# --- environment modules ----------------------------------------------------------------

_MODULE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+@-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.+@-]*)*")
MODULE_ALLOWED = "a module name such as cuda/12.2 or PrgEnv-gnu: letters, digits, _ . + @ - and /"


def module_refusal(name: str) -> str | None:
    """Why `name` is not a module name (a path, an option, a modulefile), or None: `module
    load` runs the file a path names."""
    if not _MODULE_NAME.fullmatch(name):
        return f"not a module name ({MODULE_ALLOWED}; never a path or an option)"
    if any(part in ("..", ".") for part in name.split("/")) or name.endswith((".lua", ".tcl")):
        return f"names a file, not a module ({MODULE_ALLOWED})"
    return None


# --- the python a runtime of kind none runs ------------------------------------------------

PYTHON_FORMS = "python, python3 or python3.N"
_PYTHON = re.compile(r"python(?:3(?:\.[0-9]{1,2})?)?")


def host_python_refusal(python: str) -> str | None:
    """Without a container the python runs on the host: one of the usual names, found on the
    user's own PATH, never a program the profile names."""
    if not _PYTHON.fullmatch(python):
        return f"runs on the host without a container: one of {PYTHON_FORMS}, not {python!r}"
    return None


# the image's own program folders, where its python may be named by path: none of them is one
# a runtime binds from the host by default (Apptainer binds $HOME, /tmp, /var/tmp, $PWD)
IMAGE_PROGRAM_DIRS = ("/usr", "/opt", "/bin", "/sbin")


def image_python_refusal(python: str) -> Refusal | None:
    """Why a runtime's `python:` is refused, or None: one of the usual names (the image's PATH
    finds it) or a path in the image's program folders."""
    if _PYTHON.fullmatch(python):
        return None
    where = os.path.normpath(python)
    if (
        python.startswith("/")
        and where == python
        and any(where.startswith(d + "/") for d in IMAGE_PROGRAM_DIRS)
    ):
        name = where.rsplit("/", 1)[1]
        if _PYTHON.fullmatch(name):
            return None
    return Refusal(
        f"{python!r}: not the image's python (allowed: {PYTHON_FORMS}, or such a name in the "
        f"image's {', '.join(IMAGE_PROGRAM_DIRS)}, e.g. /opt/venv/bin/python; {TRUST_HINT})"
    )
