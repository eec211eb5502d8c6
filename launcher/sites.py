"""Site profiles: what a cluster needs in its srun/sbatch lines, as validated data.

Built-in profiles live in launcher/sites/*.yaml; users add or override them in
``$XDG_CONFIG_HOME/hvd-container/sites/`` (default ``~/.config/hvd-container/sites/``) or pass
a path. Selection order: ``--site``, ``$HVD_CONTAINER_SITE``, ``site:`` in the user's
``config.yaml``, the Slurm cluster name, then ``local``.
"""

from __future__ import annotations

import os
import re
import string
import typing
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from hvd_container.launcher import schema
from hvd_container.launcher.binds import parse_bind, split_binds

from hvd_container.core.errors import UserError, raise_problems

if typing.TYPE_CHECKING:
    from hvd_container.core import yamlconf

Arch = Literal["amd64", "arm64", "ppc64le"]
RuntimeKind = Literal[
    "apptainer", "singularity", "shifter", "podman-hpc", "pyxis", "charliecloud", "none"
]
RUNTIME_KINDS = typing.get_args(RuntimeKind)
MpiPlugin = Literal["pmi2", "pmix", "pmix_v3", "pmix_v4", "pmix_v5", "cray_shasta", "none"]
MPI_PLUGINS = typing.get_args(MpiPlugin)
GpuRequest = Literal["gres", "gpus-per-node", "none"]

SITE_ENV_VAR = "HVD_CONTAINER_SITE"
SLURM_CONF_PATHS = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf")
BUILTIN_DIR = Path(__file__).with_name("sites")
# fullmatch, not match with $ (which also matches before a trailing newline); ASCII digits only
_NAME = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")
_SLURM_TIME = re.compile(r"([0-9]+-)?[0-9]+(:[0-9]{1,2}){0,2}")
_MACHINE_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
# An environment variable name: what `--env` and a profile's `env:` accept. Anything else
# would end up unquoted in `export NAME=...` lines of batch scripts.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TEMPLATE_FIELDS = ("name", "version", "registry", "dir")


SCHEMA_FILE = "site.schema.json"


def site_schema() -> dict[str, Any]:
    """The JSON Schema of a site profile file (launcher/sites/site.schema.json is its copy)."""
    return schema.json_schema(
        Site,
        "hvd-container site profile",
        "What a cluster needs in its srun/sbatch lines (hvd-container sites show FILE checks it "
        "with line numbers).",
    )


def _name_ok(value: str) -> str | None:
    return None if _NAME.fullmatch(value) else "lower-case letters, digits and . _ - only"


def _time_ok(value: str | None) -> str | None:
    if value is None or _SLURM_TIME.fullmatch(value):
        return None
    return "a Slurm time: MINUTES, HH:MM:SS or D-HH:MM:SS"


def valid_slurm_time(value: str) -> bool:
    """MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS."""
    return bool(_SLURM_TIME.fullmatch(value))


def _positive(value: int | None) -> str | None:
    return None if value is None or value >= 0 else "must be 0 or more"


def _unique(value: list[str]) -> str | None:
    return None if len(set(value)) == len(value) else "each entry may appear once"


def _bind_ok(value: list[str]) -> str | None:
    for bind in (one for item in value for one in split_binds(item)):
        parsed = parse_bind(bind, allow_unexpanded=True)
        if isinstance(parsed, str):
            return parsed
    return None


def _options_ok(value: list[str]) -> str | None:
    for option in value:
        if not option.startswith("-") or option.strip("-") == "":
            return f"each entry is an option such as --exclusive or --gres=nic:1, not {option!r}"
    return None


def _sbatch_options_ok(value: list[str]) -> str | None:
    problem = _options_ok(value)
    if problem is None and any(any(c.isspace() for c in o) for o in value):
        return "options of #SBATCH lines cannot contain spaces"
    return problem


def _interface_ok(value: str | None) -> str | None:
    if value is None or re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", value):
        return None
    return "a network interface name (letters, digits, _ . : @ -; at most 15 characters), e.g. hsn0"


def _template_ok(value: str | None) -> str | None:
    """images.template may use the documented placeholders, plainly: {name}, {version}, ..."""
    if value is None:
        return None
    allowed = ", ".join("{" + name + "}" for name in TEMPLATE_FIELDS)
    try:
        for _text, field_name, spec, conversion in string.Formatter().parse(value):
            if field_name is None:
                continue
            if field_name not in TEMPLATE_FIELDS or conversion or spec:
                shown = "{" + field_name + (f"!{conversion}" if conversion else "")
                shown += (f":{spec}" if spec else "") + "}"
                return f"not a usable template: unknown placeholder {shown} (allowed: {allowed})"
    except ValueError as exc:  # unbalanced braces
        return f"not a usable template: {exc} (allowed: {allowed})"
    return None


def env_name_problem(name: str) -> str | None:
    """Why name cannot be an environment variable, or None if it can."""
    if ENV_NAME.fullmatch(name):
        return None
    return f"{name!r} is not a variable name (letters, digits, _)"


_DATE = re.compile(r"[0-9]{4}-[0-9]{2}(-[0-9]{2})?")


def _date_ok(value: str) -> str | None:
    return None if _DATE.fullmatch(value) else "a date YYYY-MM-DD (or YYYY-MM)"


_DRIVER = re.compile(r"[0-9]{3}(\.[0-9]{1,3}){0,2}")


def _driver_ok(value: str | None) -> str | None:
    if value is None or _DRIVER.fullmatch(value):
        return None
    return 'an NVIDIA driver version such as "535" or "550.127.05"'


def _glibc_ok(value: str | None) -> str | None:
    if value is None or re.fullmatch(r"2\.[0-9]{1,2}", value):
        return None
    return 'a glibc version such as "2.31"'


def _abs_paths_ok(value: list[str]) -> str | None:
    bad = [v for v in value if not v.startswith("/") or "\n" in v]
    return f"absolute paths, not {bad[0]!r}" if bad else None


def _url_ok(value: str) -> str | None:
    return None if value.startswith(("https://", "http://")) else "an http(s) URL"


@dataclass(frozen=True)
class Source:
    """Where a fact of the profile comes from, when it was checked, and whether it could be
    confirmed (`sites show` names the unconfirmed ones)."""

    about: str
    url: str = field(metadata={"check": _url_ok})
    checked: str = field(metadata={"check": _date_ok})
    confirmed: bool = True


@dataclass(frozen=True)
class Comment:
    """A `--comment` the scheduler insists on (KISTI Neuron: the application name)."""

    required: bool = False
    default: str | None = None
    allowed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Partition:
    """A partition's node shape."""

    gpus_per_node: int = field(default=0, metadata={"check": _positive})
    cpus_per_node: int | None = field(default=None, metadata={"check": _positive})
    gpu: str | None = None
    arch: Arch | None = None


@dataclass(frozen=True)
class Scheduler:
    """The Slurm options a site needs."""

    partition: str | None = None
    partitions: dict[str, Partition] = field(default_factory=dict)
    account: str | None = None
    account_suffix: str | None = None  # Perlmutter charges GPU jobs to <project>_g
    qos: str | None = None
    constraint: str | None = None
    comment: Comment = field(default_factory=Comment)
    gpu_request: GpuRequest = "gres"
    gpus_per_node: int = field(default=0, metadata={"check": _positive})
    cpus_per_node: int | None = field(default=None, metadata={"check": _positive})
    cpus_per_task: int | None = field(default=None, metadata={"check": _positive})
    time: str | None = field(default=None, metadata={"check": _time_ok})
    srun_options: list[str] = field(default_factory=list, metadata={"check": _options_ok})
    # each is a #SBATCH line of its own, which ends at the first space
    sbatch_options: list[str] = field(default_factory=list, metadata={"check": _sbatch_options_ok})

    def __post_init__(self) -> None:
        if self.partition and self.partitions and self.partition not in self.partitions:
            known = ", ".join(self.partitions)
            raise ValueError(
                f"partition {self.partition!r} is not in partitions (allowed: {known})"
            )

    def partition_info(self, name: str | None) -> Partition | None:
        return self.partitions.get(name) if name else None


@dataclass(frozen=True)
class Runtime:
    """The container runtime of a site and its flags."""

    kind: RuntimeKind
    command: Literal["run", "exec"] = "exec"
    gpu: bool = True
    flags: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list, metadata={"check": _unique})
    python: str = "python"
    # the glibc the host libraries this runtime injects (MPI, GPU driver) were built against:
    # an image with an older glibc cannot load them
    injects_glibc: str | None = field(default=None, metadata={"check": _glibc_ok})


@dataclass(frozen=True)
class Images:
    """Where a site keeps images and how their names are made."""

    dir: str | None = None
    template: str | None = field(default=None, metadata={"check": _template_ok})
    registry: str | None = None
    # where images are unpacked for ch-run: off $HOME on sites whose home is small or slow
    # (e.g. $SCRATCH/hvd-cache; `~` and $VARS expand); $HVD_CONTAINER_CACHE wins over it
    cache_dir: str | None = None


@dataclass(frozen=True)
class Site:
    """A site profile."""

    name: str = field(metadata={"check": _name_ok})
    runtime: Runtime
    description: str = ""
    other_runtimes: list[Runtime] = field(default_factory=list)
    arch: Arch | Literal["host"] = "amd64"
    cluster_names: list[str] = field(default_factory=list)
    login_host: str | None = None
    # the compute nodes' cluster-facing interface: Jupyter listens on its address only
    jupyter_interface: str | None = field(default=None, metadata={"check": _interface_ok})
    scheduler: Scheduler = field(default_factory=Scheduler)
    mpi: MpiPlugin | None = None
    # the GPU nodes' NVIDIA driver: an image's CUDA must be one it runs (doctor, preflight)
    gpu_driver: str | None = field(default=None, metadata={"check": _driver_ok})
    # where compute nodes see the same files as the login node; empty: not known (then only
    # the usual node-local places, /tmp and the like, are refused for images)
    shared_paths: list[str] = field(default_factory=list, metadata={"check": _abs_paths_ok})
    modules: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    binds: list[str] = field(default_factory=list, metadata={"check": _bind_ok})
    images: Images = field(default_factory=Images)
    notes: list[str] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    source: str = field(default="", metadata={"internal": True})

    @property
    def unconfirmed(self) -> list[str]:
        """The facts of the profile its sources could not confirm, one line each."""
        return [f"{s.about} ({s.url}, {s.checked})" for s in self.sources if not s.confirmed]

    def runtime_for(self, kind: str | None) -> Runtime:
        """The profile's runtime, or the one of that kind (its own settings or the defaults)."""
        if kind is None or kind == self.runtime.kind:
            return self.runtime
        for other in self.other_runtimes:
            if other.kind == kind:
                return other
        if kind not in RUNTIME_KINDS:
            raise UserError(
                f"--runtime: unknown runtime {kind!r} (allowed: {', '.join(RUNTIME_KINDS)})"
            )
        return Runtime(kind=kind, gpu=self.runtime.gpu)  # type: ignore[arg-type]

    def arch_for(self, partition: str | None) -> str:
        info = self.scheduler.partition_info(partition)
        return info.arch if info and info.arch else self.arch

    def gpus_per_node(self, partition: str | None) -> int:
        info = self.scheduler.partition_info(partition)
        return info.gpus_per_node if info is not None else self.scheduler.gpus_per_node


def host_arch() -> str:
    machine = os.uname().machine.lower()
    return _MACHINE_ARCH.get(machine, machine)


def user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "hvd-container"


def user_sites_dir() -> Path:
    return user_config_dir() / "sites"


def _where_in(source: str) -> Callable[[schema.Path_], str]:
    return lambda _path: source


def validate_site(data: Any, where: Callable[[schema.Path_], str], source: str) -> Site:
    """Validate profile data; `arch: host` becomes this machine's architecture."""
    site = schema.validate(Site, data, where)
    for key in site.env:
        problem = env_name_problem(key)
        if problem:
            raise UserError(f"{where(('env', key))}: env: {problem}")
    if site.runtime.kind == "shifter":
        for flag in site.runtime.flags:
            if flag in ("-m", "--module") or flag.startswith(("--module=", "-m")):
                raise UserError(
                    f"{where(('runtime', 'flags'))}: runtime.flags: shifter modules go in runtime.modules (a second --module replaces the first), not {flag!r}"
                )
    arch = host_arch() if site.arch == "host" else site.arch
    return replace(site, arch=arch, source=source)  # type: ignore[arg-type]  # host_arch() is an Arch


def parse_site(doc: yamlconf.Document) -> Site:
    """Validate a parsed profile document (errors name FILE:LINE)."""
    return validate_site(doc.data, doc.where, doc.source)


def read_site_file(path: Path) -> Site:
    """Load and validate a profile file, through the cache of validated profiles."""
    from hvd_container.launcher import profile_cache

    cached = profile_cache.get(path)
    if cached is not None:
        try:
            return validate_site(cached, _where_in(str(path)), str(path))
        except UserError:
            pass  # the rules changed since it was cached: re-read for an exact FILE:LINE
    from hvd_container.core import yamlconf

    doc = yamlconf.load(path)
    site = parse_site(doc)
    profile_cache.put(path, doc.data)
    return site


def _site_files() -> dict[str, Path]:
    """name -> file; a user's profile overrides the built-in one of the same name."""
    files = {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.yaml"))}
    user_dir = user_sites_dir()
    if user_dir.is_dir():
        files.update({p.stem: p for p in sorted(user_dir.glob("*.yaml"))})
    return files


def list_sites() -> list[str]:
    """Names of every available profile (built-in and the user's)."""
    return sorted(_site_files())


def site_file(name: str) -> Path:
    files = _site_files()
    if name not in files:
        raise UserError(
            f"unknown site {name!r} (allowed: {', '.join(sorted(files))}, or a path to a YAML file)"
        )
    return files[name]


def load_site(name_or_path: str | os.PathLike[str]) -> Site:
    """Load a profile by name or from a YAML path."""
    text = str(name_or_path)
    looks_like_path = os.sep in text or text.endswith((".yaml", ".yml"))
    path = Path(text) if looks_like_path else site_file(text)
    site = read_site_file(path)
    if not looks_like_path and site.name != path.stem:
        from hvd_container.core import yamlconf

        line = yamlconf.load(path).line_of(("name",)) or 1
        raise UserError(
            f"{path}:{line}: name: must match the file name {path.stem!r} (got {site.name!r})"
        )
    return site


def _config_site() -> tuple[str, str] | None:
    """(site, where) from the user's config.yaml, if it names one."""
    from hvd_container.launcher import profile_cache

    path = user_config_dir() / "config.yaml"
    if not path.is_file():
        return None
    cached = profile_cache.get(path)
    if cached is not None and set(cached) <= {"site"} and isinstance(cached.get("site"), str):
        return cached["site"], str(path)
    from hvd_container.core import yamlconf

    doc = yamlconf.load(path)
    allowed = ("site",)
    for key in doc.data:
        if key not in allowed:
            raise UserError(
                f"{doc.where((key,))}: {key}: unknown key (allowed: {', '.join(allowed)})"
            )
    value = doc.data.get("site")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise UserError(
            f"{doc.where(('site',))}: site: expected a site name or path (got {value!r})"
        )
    profile_cache.put(path, doc.data)
    return value, doc.where(("site",))


def slurm_cluster_name() -> str | None:
    """The Slurm cluster name, cheaply: the job's env var, else ClusterName in slurm.conf."""
    name = os.environ.get("SLURM_CLUSTER_NAME")
    if name:
        return name
    for conf in (os.environ.get("SLURM_CONF"), *SLURM_CONF_PATHS):
        if not conf:
            continue
        try:
            text = Path(conf).read_text(errors="replace")
        except OSError:
            continue
        match = re.search(r"^\s*ClusterName\s*=\s*(\S+)", text, re.MULTILINE | re.IGNORECASE)
        if match:
            return match.group(1)
    return None


def detect_site(cluster: str | None, warnings: list[str] | None = None) -> str | None:
    """The profile whose cluster_names include the cluster name (case-insensitive). A profile
    that cannot be read is passed over with a warning: it must not stop launches that do not
    use it (the error comes back in full when it is asked for by name)."""
    if not cluster:
        return None
    wanted = cluster.lower()
    for name, path in _site_files().items():
        try:
            names = read_site_file(path).cluster_names
        except UserError as exc:
            if warnings is not None:
                warnings.append(f"site profile {name} passed over: {'; '.join(exc.problems)}")
            continue
        if wanted in (n.lower() for n in names):
            return name
    return None


def choose_site(flag: str | None = None, warnings: list[str] | None = None) -> tuple[str, str]:
    """(site name or path, why it was chosen), following the documented order; profiles that
    cannot be read while detecting are passed over with a message in warnings."""
    if flag:
        return flag, "--site"
    from_env = os.environ.get(SITE_ENV_VAR)
    if from_env:
        return from_env, f"${SITE_ENV_VAR}"
    configured = _config_site()
    if configured is not None:
        return configured[0], configured[1]
    cluster = slurm_cluster_name()
    detected = detect_site(cluster, warnings)
    if detected:
        return detected, f"Slurm cluster name {cluster!r}"
    return "local", "default"


def select_site(flag: str | None = None, warnings: list[str] | None = None) -> Site:
    """The site to use: --site, $HVD_CONTAINER_SITE, user config, Slurm cluster name, local."""
    name, why = choose_site(flag, warnings)
    if why == "--site":
        return load_site(name)
    try:
        return load_site(name)
    except UserError as exc:
        # say where the name came from: the user did not type it on this command line
        raise_problems([f"{why}: {problem}" for problem in exc.problems])
        raise
