"""Site profiles found, read, trusted and chosen: the loaders beside the model
(launcher/sites/model.py holds the data and its rules).

Built-in profiles live in launcher/sites/*.yaml; users add or override them in
``$XDG_CONFIG_HOME/hvd-container/sites/`` (default ``~/.config/hvd-container/sites/``) or pass
a path. Selection order: ``--site``, ``$HVD_CONTAINER_SITE``, ``site:`` in the user's
``config.yaml``, the Slurm cluster name, then ``local``. A profile read from a path must be the
user's own (or root's) and writable by nobody else, and may set what is outside the guard's
allow-list only once the user trusts it (`sites trust FILE`).
"""

from __future__ import annotations

import datetime
import os
import re
import shlex
from pathlib import Path
from typing import Any

import yaml
from hvd_container.launcher import guard
from hvd_container.launcher.sites import trust
from hvd_container.launcher.sites.model import CHECK_NAMES, PATTERN_WORDS, Site, host_arch

from hvd_container.core import yamlconf
from hvd_container.core.atomic import write_text
from hvd_container.core.errors import UserError, raise_problems
from hvd_container.core.files import not_a_file, untrusted_because
from hvd_container.core.text import did_you_mean

SITE_ENV_VAR = "HVD_CONTAINER_SITE"
SLURM_CONF_PATHS = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf")
BUILTIN_DIR = Path(__file__).parent  # the built-in profiles sit beside the code that reads them
SCHEMA_FILE = "site.schema.json"


def user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "hvd-container"


def user_sites_dir() -> Path:
    return user_config_dir() / "sites"


def parse_site(doc: yamlconf.Document, findings: list[str] | None = None) -> Site:
    """Validate a parsed profile document (every error a line naming FILE:LINE); `arch: host`
    becomes this machine's architecture. `findings`: judge it as trusted, and collect there
    what only a trusted profile may set (`sites trust`)."""
    context: dict[str, Any] = {CHECK_NAMES: _check_names, guard.TRUSTED: trusted(doc)}
    if findings is not None:
        context.update({guard.TRUSTED: True, guard.FINDINGS: findings})
    try:
        site = yamlconf.validate(Site, doc, doc.data, words=PATTERN_WORDS, context=context)
    except UserError as exc:  # the fix names this file
        fix = f"sites trust {shlex.quote(doc.source)}"
        raise_problems([p.replace("sites trust FILE", fix) for p in exc.problems])
        raise
    if site.arch == "host":
        site = site.model_copy(update={"arch": host_arch()})
    site._source = doc.source
    return site


def is_builtin(path: str | os.PathLike[str]) -> bool:
    try:
        return Path(path).resolve().parent == BUILTIN_DIR.resolve()
    except (OSError, RuntimeError):
        return False


def trust_store() -> trust.TrustStore:
    return trust.TrustStore(user_config_dir())


def own_files(doc: yamlconf.Document) -> list[Path]:
    """The files a profile is made of that are not built in."""
    docs = doc.docs if isinstance(doc, yamlconf.Layered) else [doc]
    return [Path(d.source) for d in docs if not is_builtin(d.source)]


def trusted(doc: yamlconf.Document) -> bool:
    """Every file the profile is made of is built in or trusted (`sites trust FILE`)."""
    mine = own_files(doc)
    if not mine:
        return True
    store = trust_store()
    return all(store.trusts(path) for path in mine)


def outside_allow_list(path: Path) -> tuple[list[Path], list[str]]:
    """`sites trust FILE`: the files the profile at path is made of (not the built-in ones) and
    what in it only a trusted profile may set, one line each (FILE:LINE is not known past the
    merge: each line names the key)."""
    doc = _load(path)
    found: list[str] = []
    parse_site(doc, found)
    return own_files(doc), found


def trust_profile(
    path: str | os.PathLike[str], record: bool = True
) -> tuple[list[Path], list[str]]:
    """`sites trust FILE`: what the profile sets outside the allow-list (one line each), after
    recording the digest of each file of the user's it is made of (record=False: only say)."""
    file = Path(path)
    if is_builtin(file):
        raise UserError(f"{file}: a built-in profile is trusted already")
    files, found = outside_allow_list(file)
    if record:
        trust_store().add(files)
    return files, found


def untrust_profile(path: str | os.PathLike[str]) -> bool:
    return trust_store().remove(Path(path))


def _check_names() -> list[str]:
    """The name of every check (a profile's `acknowledge` names some)."""
    # the check registry beside the model, not inside it: loading the model alone saves 20 ms
    from hvd_container.launcher.checks import registry as checks

    return [c.name for c in checks.registry()]


def read_site_file(path: Path) -> Site:
    """Load and validate a profile file (over the profiles it extends)."""
    return parse_site(_load(path))


def validate_site_file(path: str | os.PathLike[str]) -> Site:
    """`sites validate FILE`: every problem of the profile at once (UserError/Problems), each
    `FILE:LINE: key: problem (allowed: ...)`; its name must be the file's name, as a profile
    found by name must be."""
    file = Path(path)
    doc = _load(file)
    problems: list[str] = []
    site = None
    try:
        site = parse_site(doc)
    except UserError as exc:
        problems += exc.problems
    name = doc.data.get("name") if isinstance(doc.data, dict) else None
    if isinstance(name, str) and name != file.stem:
        problems.append(
            f"{doc.where(('name',))}: name: must equal the file name {file.stem!r} (got {name!r}): rename the file to {name}.yaml or write name: {file.stem}"
        )
    raise_problems(problems)
    assert site is not None
    return site


def _load(path: Path) -> yamlconf.Layered:
    return yamlconf.load_layered(path, _extended, "a site name or a path", admit=require_trusted)


def require_trusted(path: Path) -> None:
    """A profile decides what runs on the cluster in the user's name: one read from a path
    (--site FILE, extends:, the user's config folder) must be the user's or root's and
    writable by nobody else, as OpenSSH asks of its config files. Built-in ones are trusted."""
    if is_builtin(path):
        return
    if not path.exists() or not_a_file(path, "a YAML file"):
        return  # said in one line where it is read
    why = untrusted_because(path)
    if why is not None:
        raise UserError(
            f"{path}: refused: {why}; a site profile decides what runs in your name, so it "
            "must be yours (or root's) and writable by you only (chmod go-w; copy a "
            "colleague's profile into your own folder)"
        )


def _extended(name: str, extending: Path) -> Path:
    """The profile `extends: name` in the file `extending` means: a path (next to that file, or
    as given), else the profile of that name, the built-in one when the file overrides it."""
    if os.sep in name or name.endswith((".yaml", ".yml")):
        beside = extending.parent / name
        return beside if beside.exists() else Path(name)
    files = _site_files()
    found = files.get(name)
    if found is not None and found.resolve() == extending.resolve():
        found = BUILTIN_DIR / f"{name}.yaml"  # a user's own neuron.yaml extends the built-in one
    if found is None or not found.exists():
        raise UserError(f"unknown site {name!r} (allowed: {', '.join(sorted(files))}, or a path)")
    return found


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
            f"unknown site {name!r}{did_you_mean(name, files)} (allowed: {', '.join(sorted(files))}, or a path to a YAML file)"
        )
    return files[name]


def site_ref(site: Site) -> str:
    """How a later command names this profile: its name where the name finds its file, else
    the file."""
    found = _site_files().get(site.name)
    return site.name if found is not None and str(found) == site.source else site.source


def load_site(name_or_path: str | os.PathLike[str]) -> Site:
    """Load a profile by name or from a YAML path."""
    text = str(name_or_path)
    looks_like_path = os.sep in text or text.endswith((".yaml", ".yml"))
    path = Path(text) if looks_like_path else site_file(text)
    doc = _load(path)
    site = parse_site(doc)
    if not looks_like_path and site.name != path.stem:
        raise UserError(
            f"{doc.where(('name',))}: name: must match the file name {path.stem!r} (got {site.name!r})"
        )
    return site


def _config_site() -> tuple[str, str] | None:
    """(site, where) from the user's config.yaml, if it names one."""
    path = user_config_dir() / "config.yaml"
    if not path.is_file():
        return None
    require_trusted(path)
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
    if warnings is not None and (why == "default" or why.startswith("Slurm cluster name")):
        # nobody named it (not --site, the variable or the config file): say which it is
        warnings.append(
            f"no --site: site {name} ({why}); --site, ${SITE_ENV_VAR} or the config file's "
            "`site:` names another"
        )
    try:
        return load_site(name)
    except UserError as exc:
        # say where the name came from: the user did not type it on this command line
        raise_problems([f"{why}: {problem}" for problem in exc.problems])
        raise


def record_expected_busbw(site: Site, busbw: float, about: str) -> Path:
    """Write `expected_busbw` (MB/s) into the user's override of `site` (its file in the user's
    sites folder, made as `extends: NAME` when there is none), with a source that says where the
    figure comes from and when; the file is read back as a profile before it stays."""
    path = user_sites_dir() / f"{site.name}.yaml"
    before = path.read_text() if path.is_file() else None
    data: dict[str, Any] = (yaml.safe_load(before) if before else None) or {"extends": site.name}
    if not isinstance(data, dict):
        raise UserError(f"{path}: not a mapping: cannot record expected_busbw in it")
    sources = data.get("sources")
    if sources is None:  # lists replace the extended profile's: keep its sources
        sources = [s.model_dump(exclude_none=True) for s in site.sources]
    today = datetime.date.today().isoformat()
    kept = [s for s in sources if not (isinstance(s, dict) and s.get("keys") == ["expected_busbw"])]
    kept.append(
        {"about": about, "probed": f"{os.uname().nodename}, {today}", "checked": today,
         "keys": ["expected_busbw"]}
    )  # fmt: skip
    data["expected_busbw"] = round(busbw, 1)
    data["sources"] = kept
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_text(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=False), mode=0o600)
    try:
        read_site_file(path)
    except UserError:
        if before is None:
            path.unlink()
        else:
            write_text(path, before, mode=0o600)
        raise
    return path
