"""What a site profile may not set, whoever wrote it: each rule a small function that returns
why a value is refused (naming the allowed form) or None.

A profile gives the cluster's facts (partitions, modules, variables NCCL reads). It never
decides which program runs, what it loads before its own code, where a job's output goes or
where its ranks meet: those belong to the user and the tool. The rules below are that line.
"""

from __future__ import annotations

import os
import re

# --- environment variables --------------------------------------------------------------

# the shell, the loader and Python: each decides which program or code runs
_PROGRAM_VARS = frozenset(
    {"PATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "CDPATH", "IFS"}
)
# Python variables that only tune the interpreter; every other PYTHON* can run code of its
# own (PYTHONSTARTUP, PYTHONPATH, PYTHONHOME, PYTHONBREAKPOINT, PYTHONWARNINGS imports a module)
PYTHON_TUNING = frozenset(
    {
        "PYTHONUNBUFFERED", "PYTHONFAULTHANDLER", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONNOUSERSITE",
    }
)  # fmt: skip
# what Slurm's commands read as their own options: prologs, where output goes, what is
# exported, the job's name and folder, an OCI container, another slurm.conf (srun(1),
# sbatch(1): INPUT ENVIRONMENT VARIABLES)
_SLURM_PREFIXES = ("SLURM_", "SRUN_", "SBATCH_", "SALLOC_")
_SLURM_WORDS = (
    "PROLOG", "EPILOG", "EXPORT", "OUTPUT", "ERROR", "INPUT", "OPEN_MODE", "JOB_NAME",
    "STDOUTMODE", "STDERRMODE", "STDINMODE", "WORKING_DIR", "CHDIR", "CONTAINER", "BCAST", "CONF",
    "WRAP",
)  # fmt: skip
# where the ranks meet: the controllers set these for each launch
RENDEZVOUS_VARS = frozenset(
    {
        "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK",
        "LOCAL_WORLD_SIZE", "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT",
        "HOROVOD_HOSTNAME", "HOROVOD_RANK", "HOROVOD_SIZE", "HVD_GLOO_DIR",
    }
)  # fmt: skip
# MPI launchers' remote-start programs (Open MPI's plm_rsh_agent, MPICH Hydra's)
_MPI_AGENT = re.compile(
    r"^(?:OMPI|PRTE|PMIX)_MCA_.*agent|^HYDRA_(?:LAUNCHER|BOOTSTRAP)_EXEC$", re.I
)
# a container runtime's own settings that bind or pass variables in (use binds:/env:)
_FORWARDED = ("APPTAINERENV_", "SINGULARITYENV_")
_RUNTIME_BINDS = frozenset(
    {"APPTAINER_BIND", "APPTAINER_BINDPATH", "SINGULARITY_BIND", "SINGULARITY_BINDPATH"}
)


def env_refusal(name: str) -> str | None:
    """Why a profile's env: may not set `name`, or None."""
    for prefix in _FORWARDED:  # the runtime sets NAME inside the container: the same rules
        if name.startswith(prefix) and len(name) > len(prefix):
            inner = env_refusal(name[len(prefix) :])
            return f"{prefix} passes it on: {inner}" if inner else None
    if name in _PROGRAM_VARS or name.startswith("LD_"):
        return "decides which program or library runs (set it in your own shell if you must)"
    if name.startswith("PYTHON") and name not in PYTHON_TUNING:
        return (
            "can run code of its own in every Python (allowed PYTHON* variables: "
            f"{', '.join(sorted(PYTHON_TUNING))})"
        )
    if name.startswith(_SLURM_PREFIXES) and any(w in name for w in _SLURM_WORDS):
        return (
            "Slurm reads it as an option that runs a prolog, chooses the job's output, "
            "name, folder, exported variables or container (give it as a flag yourself)"
        )
    if name in RENDEZVOUS_VARS:
        return "the launch sets where its ranks meet; a profile cannot"
    if _MPI_AGENT.search(name):
        return "names the program MPI starts on other nodes"
    if name in _RUNTIME_BINDS:
        return "binds paths into the container: list them under binds:, where they are checked"
    return None


# --- scheduler options ------------------------------------------------------------------

# long options that decide where output goes, what runs or what is exported (srun(1), sbatch(1))
_SCHEDULER_LONG = (
    "output", "error", "input", "open-mode", "export", "export-file", "job-name", "chdir",
    "task-prolog", "task-epilog", "prolog", "epilog", "wrap", "container", "container-id",
    "bcast", "uid", "gid", "get-user-env",
)  # fmt: skip
# their short forms, and the short options that take no argument (bundled as -vQ)
_SCHEDULER_SHORT = "oeiJD"
_SHORT_FLAGS = "hHkOQsuVvWlXZ"
OPTION_ALLOWED = (
    "options on resources and placement (--exclusive, --gres=..., --constraint=...); "
    "not --output/--error/--input/--open-mode/--export/--job-name/--chdir, prologs, "
    "epilogs, --wrap, --container, --bcast, --uid/--gid"
)


def scheduler_option_refusal(option: str) -> str | None:
    """Why a profile's srun_options/sbatch_options entry is refused, or None."""
    refused = refused_scheduler_option(option)
    return f"{refused} is the user's to choose ({OPTION_ALLOWED})" if refused else None


def refused_scheduler_option(option: str) -> str | None:
    """The option (--output, -o) that `option` is, if it is one no profile or pass-through may
    set (a program, a file, the job's environment), else None. getopt takes an unambiguous
    abbreviation of a long option (`--outp=x` is --output) and bundles short ones (`-vofile`
    is -v -o file): both are read as Slurm reads them."""
    if option.startswith("--"):
        name = option[2:].split("=", 1)[0].lower()
        hit = next((o for o in _SCHEDULER_LONG if name and o.startswith(name)), None)
        return f"--{hit}" if hit is not None else None
    for letter in option[1:]:
        if letter in _SCHEDULER_SHORT:
            return f"-{letter}"
        if letter not in _SHORT_FLAGS:
            return None  # the rest is this option's value
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


# --- binds ------------------------------------------------------------------------------


def bind_source_refusal(source: str) -> str | None:
    """Why a profile may not bind `source` into the container, or None."""
    if source.startswith("/") and os.path.normpath(source) in ("/", "//"):
        return "binds the whole host file system (/) into the container: name the folders"
    return None


# --- runtime flags ----------------------------------------------------------------------

# long options that bind paths (their values are judged as binds), and those that choose the
# program, its folder or its environment inside the container, in every runtime; each
# runtime adds its short forms (RuntimeProfile.short_bind_flags, .short_command_flags)
_BIND_FLAGS = ("--bind", "--volume", "--mount", "--container-mounts")
_COMMAND_FLAGS = (
    "--entrypoint", "--app", "--pwd", "--workdir", "--cd", "--env", "--env-file", "--set-env",
    "--unset-env", "--container-workdir", "--container-env", "--container-entrypoint",
)  # fmt: skip
FLAGS_ALLOWED = (
    "the runtime's own options (e.g. --net=host, --writable-tmpfs); binds of folders other "
    "than /; not --entrypoint/--app, a working directory (--pwd, --workdir, --cd) or "
    "variables (--env, --env-file, --set-env): use the profile's env:"
)


def runtime_flags_refusal(
    flags: list[str], short_bind: tuple[str, ...] = (), short_command: tuple[str, ...] = ()
) -> str | None:
    """Why a runtime's flags are refused, or None."""
    for i, flag in enumerate(flags):
        name, eq, attached = flag.partition("=")
        if not flag.startswith("--") and flag.startswith("-") and len(flag) >= 2:
            name, eq, attached = flag[:2], "", flag[2:]
        if name in _COMMAND_FLAGS or name in short_command:
            return f"{flag!r}: {name} chooses what runs in the container ({FLAGS_ALLOWED})"
        if name in _BIND_FLAGS or name in short_bind:
            value = attached
            if not value and not eq:
                value = flags[i + 1] if i + 1 < len(flags) else ""
            for source in _bind_sources(value):
                why = bind_source_refusal(source)
                if why:
                    return f"{flag!r} {value!r}: {why}"
    return None


def _bind_sources(value: str) -> list[str]:
    """The host paths of a bind value: SRC[:DST[:OPT]] lists, or a --mount's src=/source=."""
    if "=" in value:
        fields = dict(f.partition("=")[::2] for f in value.split(","))
        return [v for k, v in fields.items() if k in ("src", "source")]
    return [part.split(":", 1)[0] for part in value.split(",")]


PYTHON_FORMS = "python, python3 or python3.N"
_PYTHON = re.compile(r"python(?:3(?:\.[0-9]{1,2})?)?")


def host_python_refusal(python: str) -> str | None:
    """Without a container the python runs on the host: one of the usual names, found on the
    user's own PATH, never a program the profile names."""
    if not _PYTHON.fullmatch(python):
        return f"runs on the host without a container: one of {PYTHON_FORMS}, not {python!r}"
    return None
