"""Locks: a recipe's whole Python package set resolved for its target, with hashes.

`lock_recipe` gathers what the recipe's pip steps ask for (frameworks, Horovod and its build
helpers, `pip:` extras), resolves it for the image's Python, platform and architecture with
uv's resolver against the indexes the build uses (the host's pip configuration, and
download.pytorch.org where the recipe takes torch from there), and writes the result next to
the recipe as `NAME.lock`: pip's requirements format with every file's hash, and uv's `# via`
notes, which give the dependency chain of each package. Only metadata is fetched, no wheel.

The known incompatibilities are checked on the resolved set, not only on the recipe's own
pins: each is a small named rule (LOCK_RULES) giving the package chain and the fix.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hvd_container.containers.base_pin import BasePin, needs_pin, read_pin, resolve_pin
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import StepFailed, UserError, missing_build_extra, raise_problems

if TYPE_CHECKING:
    from hvd_container.containers.engine import Engine
    from hvd_container.containers.pipconfig import HostPipConfig
    from hvd_container.containers.recipe import Recipe

# glibc of the base images' distributions: the manylinux level of the wheels they can run
_GLIBC = {
    "bookworm": "2_36", "bullseye": "2_31", "trixie": "2_41",
    "ubuntu24.04": "2_39", "ubuntu22.04": "2_35", "ubuntu20.04": "2_31",
}  # fmt: skip
_MACHINE = {"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "powerpc64le"}
ROOT = "-r -"  # uv's `# via` name for the recipe's own requirements (read from stdin)


@dataclass(frozen=True)
class LockInputs:
    """What a lock is resolved from; its digest says whether a lock is still current."""

    requirements: list[str]
    python_version: str
    platform: str
    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)

    def digest(self) -> str:
        return inputs_digest(self.requirements, self.python_version, self.platform)


def inputs_digest(requirements: list[str], python_version: str, platform: str) -> str:
    """What was asked for, for which target: the indexes (this machine's pip configuration)
    say only where the files come from, and the lock holds every file's hash."""
    asked = {"requirements": requirements, "python_version": python_version, "platform": platform}
    blob = json.dumps(asked, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class Package:
    name: str  # canonical
    version: str
    via: tuple[str, ...]  # canonical names of what pulls it in; ROOT for the recipe itself


@dataclass(frozen=True)
class LockResult:
    path: Path
    packages: dict[str, Package]
    changes: list[str]  # against the lock that was there ("+ new 1.0", "- old 2.0", "a 1 -> 2")
    written: bool
    seconds: float
    # the base image's digest (None: a debootstrap base, or a digest in the recipe)
    base: BasePin | None = None


def platform_of(recipe: Recipe) -> str:
    """uv's --python-platform for the image: MACHINE-manylinux_GLIBC of the base's distribution."""
    base = recipe.base.debootstrap_suite or recipe.base.image
    glibc = next((v for k, v in _GLIBC.items() if k in base), "2_28")
    return f"{_MACHINE[recipe.arch]}-manylinux_{glibc}"


def requirements(recipe: Recipe) -> list[str]:
    """What the recipe's pip steps install, as requirements (frameworks the base image brings,
    `source: image`, are not pip's to resolve)."""
    from hvd_container.containers.blocks import gpu_wheels, horovod, mpi_wheel, pytorch

    reqs: list[str] = [*mpi_wheel.requirements(recipe), *gpu_wheels.requirements(recipe)]
    tf = recipe.tensorflow
    if tf is not None and tf.source == "pip":
        reqs.append(f"{tf.package}=={tf.version}")
    if recipe.pytorch is not None and recipe.pytorch.source == "pip":
        reqs += pytorch.requirements(recipe)
    if recipe.lightning is not None:
        reqs.append(f"{recipe.lightning.package}=={recipe.lightning.version}")
    if recipe.horovod is not None:
        reqs += [*horovod.BUILD_PYTHON_DEPS, f"horovod=={recipe.horovod.version}"]
    return [*reqs, *recipe.pip]


def lock_inputs(recipe: Recipe, pip: HostPipConfig) -> LockInputs:
    from hvd_container.containers.blocks import pytorch

    extra = list(pip.extra_index_urls)
    torch_index = pytorch.index_url(recipe)
    if torch_index and torch_index not in extra:
        extra.append(torch_index)
    return LockInputs(
        requirements=requirements(recipe),
        python_version=recipe.python.version,
        platform=platform_of(recipe),
        index_url=pip.index_url,
        extra_index_urls=extra,
        find_links=[link for link in pip.find_links if link],
    )


def uv_command() -> list[str]:
    """uv, from PATH or from the `uv` package (the build extra)."""
    found = shutil.which("uv")
    if found:
        return [found]
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise missing_build_extra("uv, the resolver `lock` uses,") from None
    return [find_uv_bin()]


def compile_argv(inputs: LockInputs, uv: list[str]) -> list[str]:
    argv = [*uv, "pip", "compile", "-", "--quiet", "--no-header", "--generate-hashes"]
    argv += ["--annotation-style", "line", "--python-version", inputs.python_version]
    argv += ["--python-platform", inputs.platform, "--no-config"]
    # the build's pip tries every index for the best version: so does the lock
    argv += ["--index-strategy", "unsafe-best-match"]
    if inputs.index_url:
        argv += ["--index-url", inputs.index_url]
    for url in inputs.extra_index_urls:
        argv += ["--extra-index-url", url]
    for link in inputs.find_links:
        argv += ["--find-links", link]
    return argv


def resolve(inputs: LockInputs, uv: list[str] | None = None, timeout: float = 600) -> str:
    """The resolved set as uv writes it; a failed resolution is one line with uv's reason."""
    argv = compile_argv(inputs, uv or uv_command())
    try:
        done = subprocess.run(
            argv,
            input="\n".join(inputs.requirements) + "\n",
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise StepFailed(f"resolving the lock took more than {timeout:.0f} s") from None
    if done.returncode != 0:
        raise StepFailed(_failure(done.stderr, done.returncode))
    return done.stdout


_FETCH = re.compile(r"Failed to fetch: (\S+)")


def _failure(stderr: str, code: int) -> str:
    """uv's reason on one line: an index it cannot reach, else its explanation of the conflict."""
    text = " ".join(stderr.split())
    fetch = _FETCH.search(text)
    if fetch:
        url = fetch[1]
        index = url.rsplit("/", 2)[0] if url.endswith("/") else url
        last = text.rsplit("cause:", 1)[-1].strip()
        return (
            f"cannot reach the index {index} from here ({last}): lock where it is reachable, "
            "or take the packages from an index this machine reaches"
        )
    reason = re.sub(r"^.*?(No solution found)", r"\1", text.replace("╰─▶", "").replace("×", ""))
    return f"the recipe's packages cannot be resolved together: {reason or f'exit {code}'}"


_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.M)
_VIA = re.compile(r"#\s*via\s+(.*)$")


def parse_lock(text: str) -> dict[str, Package]:
    """name -> Package of a lock (uv's line annotations: `# via a, b` after an entry)."""
    packages: dict[str, Package] = {}
    current: tuple[str, str] | None = None
    for line in text.splitlines():
        entry = _ENTRY.match(line)
        if entry:
            current = (str(canonicalize_name(entry[1])), entry[2])
            packages[current[0]] = Package(current[0], current[1], ())
            continue
        via = _VIA.search(line)
        if via and current is not None:
            names = tuple(
                v if v == ROOT else str(canonicalize_name(v))
                for v in (part.strip() for part in via[1].split(","))
                if v
            )
            packages[current[0]] = Package(current[0], current[1], names)
    return packages


def chain(packages: dict[str, Package], name: str) -> str:
    """How name comes in: `lightning -> torchmetrics -> torch` (the recipe's own: `torch`)."""
    path = [name]
    seen = {name}
    while True:
        via = [v for v in packages[path[0]].via if v != ROOT and v in packages and v not in seen]
        if not via or ROOT in packages[path[0]].via:
            return " -> ".join(path)
        path.insert(0, via[0])
        seen.add(via[0])


def _v(packages: dict[str, Package], name: str) -> Version | None:
    package = packages.get(name)
    if package is None:
        return None
    try:
        return Version(package.version.split("+")[0])
    except InvalidVersion:
        return None


LockRule = Callable[["Recipe", dict[str, Package]], "list[str]"]


def numpy2_with_numpy1_frameworks(recipe: Recipe, packages: dict[str, Package]) -> list[str]:
    """TensorFlow < 2.16 and torch < 2.3 are built against NumPy 1: NumPy 2 breaks them."""
    numpy = _v(packages, "numpy")
    if numpy is None or numpy < Version("2"):
        return []
    found = []
    for name, first in (("tensorflow", "2.16"), ("tensorflow-cpu", "2.16"), ("torch", "2.3")):
        framework = _v(packages, name)
        if framework is not None and framework < Version(first):
            found.append(
                f"numpy {packages['numpy'].version} ({chain(packages, 'numpy')}) with {name} "
                f"{packages[name].version}, which is built against NumPy 1 (NumPy 2 needs "
                f"{name} >= {first}): add numpy<2 to pip:"
            )
    return found


def horovod_0281_with_tensorflow_216(recipe: Recipe, packages: dict[str, Package]) -> list[str]:
    """Horovod 0.28.1's TensorFlow ops do not build against TensorFlow 2.16 (Keras 3)."""
    hvd, tf = _v(packages, "horovod"), _v(packages, "tensorflow") or _v(packages, "tensorflow-cpu")
    if hvd is None or tf is None or hvd > Version("0.28.1") or tf < Version("2.16"):
        return []
    name = "tensorflow" if "tensorflow" in packages else "tensorflow-cpu"
    return [
        f"horovod {packages['horovod'].version} with {name} {packages[name].version} "
        f"({chain(packages, name)}): Horovod 0.28.1 does not build against TensorFlow >= 2.16; "
        "pin tensorflow below 2.16"
    ]


def pinned_framework_replaced(recipe: Recipe, packages: dict[str, Package]) -> list[str]:
    """A framework the recipe pins must be the one installed (not one a dependency pulls in)."""
    found = []
    for req in requirements(recipe):
        name, _, pin = req.partition("==")
        key = str(canonicalize_name(name))
        got = packages.get(key)
        if pin and got is not None and got.version != pin:
            found.append(
                f"{name}: the recipe pins {pin}, the resolved set has {got.version} "
                f"({chain(packages, key)}): pin the dependency that asks for it, or change {name}"
            )
    return found


LOCK_RULES: list[LockRule] = [
    numpy2_with_numpy1_frameworks,
    horovod_0281_with_tensorflow_216,
    pinned_framework_replaced,
]


def resolved_problems(recipe: Recipe, packages: dict[str, Package]) -> list[str]:
    return [problem for rule in LOCK_RULES for problem in rule(recipe, packages)]


def header(recipe: Recipe, ref: str, inputs: LockInputs, base: BasePin | None = None) -> str:
    return (
        f"# hvd-container lock of recipe {recipe.name} {recipe.version}: "
        f"refresh with `hvd-container lock {ref}`\n"
        f"# python {inputs.python_version}, {inputs.platform}; inputs sha256:{inputs.digest()}\n"
        + (base.line() if base else "")
    )


MAX_LOCK_BYTES = 1 << 20


def read_lock(recipe: Recipe, recipe_path: Path, ref: str) -> str | None:
    """The lock next to the recipe file, or None; a lock made for other inputs is refused with
    the command that refreshes it (the build would install packages the recipe no longer asks
    for)."""
    from hvd_container.core.files import read_limited_text

    path = recipe_path.with_suffix(".lock")
    if not path.exists():
        return None
    text = read_limited_text(path, "a lock file", MAX_LOCK_BYTES, "a lock")
    wanted = inputs_digest(requirements(recipe), recipe.python.version, platform_of(recipe))
    if lock_digest(text) != wanted:
        raise UserError(
            f"{path}: stale: the recipe asks for other packages or another target than it was "
            f"locked for; refresh it with `hvd-container lock {ref}`"
        )
    pin = read_pin(text)
    if pin is not None and pin.image != recipe.base.image:
        raise UserError(
            f"{path}: stale: it pins the base {pin.image}, the recipe's base.image is "
            f"{recipe.base.image}; refresh it with `hvd-container lock {ref}`"
        )
    problem = _unsafe_lock_line(text)
    if problem:
        raise UserError(f"{path}: {problem}")
    return text


def _unsafe_lock_line(text: str) -> str | None:
    """A lock is pip's requirements format: entries, --hash options and comments, nothing that
    points pip elsewhere (-e, -r, --index-url ...), whoever wrote the file."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or _ENTRY.match(stripped):
            continue
        if re.fullmatch(r"--hash=sha256:[0-9a-f]{64}( \\)?", stripped):
            continue
        return f"line {number}: not a locked package, hash or comment (pip options are not allowed)"
    return None


def without(text: str, name: str) -> tuple[str, str]:
    """(the lock without package name's entry, that entry alone with its hashes)."""
    kept: list[str] = []
    taken: list[str] = []
    target = kept
    for line in text.splitlines(keepends=True):
        entry = _ENTRY.match(line)
        if entry:
            target = taken if canonicalize_name(entry[1]) == canonicalize_name(name) else kept
        target.append(line)
    return "".join(kept), "".join(taken)


def lock_digest(text: str) -> str | None:
    """The inputs digest a lock file was made from (its header), or None."""
    match = re.search(r"inputs sha256:([0-9a-f]{64})", text)
    return match[1] if match else None


def changes(old: dict[str, Package], new: dict[str, Package]) -> list[str]:
    out = [f"+ {n} {new[n].version}" for n in sorted(new.keys() - old.keys())]
    out += [f"- {n} {old[n].version}" for n in sorted(old.keys() - new.keys())]
    out += [
        f"{n} {old[n].version} -> {new[n].version}"
        for n in sorted(old.keys() & new.keys())
        if old[n].version != new[n].version
    ]
    return out


def base_changes(old: BasePin | None, new: BasePin | None) -> list[str]:
    if new is None or new.digest is None or (old is not None and old.digest == new.digest):
        return []
    if old is None or old.digest is None or old.image != new.image:
        return [f"+ base {new.image} {new.digest}"]
    return [f"base {new.image} {old.digest} -> {new.digest}"]


def lock_recipe(
    ref: str,
    *,
    check: bool = False,
    pip: HostPipConfig | None = None,
    uv: list[str] | None = None,
    engine: Engine | None = None,
) -> LockResult:
    """Resolve ref's recipe and write NAME.lock next to it (check: only say what would change).

    Raises UserError for every known incompatibility in the resolved set, and StepFailed when
    the packages cannot be resolved together.
    """
    from hvd_container.containers.pipconfig import read_host_pip_config
    from hvd_container.containers.recipe import load_recipe, recipe_file

    recipe = load_recipe(ref, with_lock=False)  # a stale lock is what this replaces
    path = recipe_file(ref).with_suffix(".lock")
    inputs = lock_inputs(recipe, pip if pip is not None else read_host_pip_config())
    if not inputs.requirements:
        raise UserError(f"recipe {recipe.name}: nothing to lock (it installs no pip packages)")
    started = time.monotonic()
    try:
        old_text = path.read_text()
    except FileNotFoundError:
        old_text = ""
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
    old_pin = read_pin(old_text)
    pin = resolve_pin(recipe, engine) if needs_pin(recipe) else None
    if pin and pin.digest is None and old_pin and old_pin.image == pin.image and old_pin.digest:
        pin = old_pin  # a registry out of reach does not undo a pin
    text = header(recipe, ref, inputs, pin) + resolve(inputs, uv)
    packages = parse_lock(text)
    raise_problems([f"{path}: {problem}" for problem in resolved_problems(recipe, packages)])
    old = parse_lock(old_text) if old_text else {}
    found = base_changes(old_pin, pin) + changes(old, packages)
    write = not check and (found or not path.exists() or path.read_text() != text)
    if write:
        write_text(path, text)
    return LockResult(path, packages, found, bool(write), time.monotonic() - started, pin)
