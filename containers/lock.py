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

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hvd_container.containers import pipconfig
from hvd_container.containers.base_pin import BasePin, needs_pin, read_pin
from hvd_container.containers.blocks import pip_requirements, pytorch
from hvd_container.containers.engine import Engine, EngineError, open_engine
from hvd_container.containers.lockfile import (
    ROOT,
    Package,
    entries,
    header,
    inputs_digest,
    lock_digest,
    parse_lock,
)
from hvd_container.containers.pipconfig import HostPipConfig
from hvd_container.containers.recipe import Recipe
from hvd_container.containers.recipe_loader import image_arches, inherited_lock, recipe_lock_file
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import (
    StepFailed,
    UserError,
    brief,
    missing_build_extra,
    raise_problems,
)

try:  # the build extra brings uv; `uv` on PATH serves as well
    from uv import find_uv_bin  # type: ignore[import-not-found, unused-ignore]
except ModuleNotFoundError:
    find_uv_bin = None  # type: ignore[assignment]


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


@dataclass(frozen=True)
class LockResult:
    path: Path
    packages: dict[str, Package]
    changes: list[str]  # against the lock that was there ("+ new 1.0", "- old 2.0", "a 1 -> 2")
    written: bool
    seconds: float
    # the base image's digest (None: a debootstrap base, or a digest in the recipe)
    base: BasePin | None = None
    arch: str | None = None  # the image's, where the recipe makes one for each of several


def lock_inputs(recipe: Recipe, pip: HostPipConfig) -> LockInputs:
    extra = list(pip.extra_index_urls)
    torch_index = pytorch.index_url(recipe)
    if torch_index and torch_index not in extra:
        extra.append(torch_index)
    return LockInputs(
        requirements=pip_requirements(recipe),
        python_version=recipe.python.version,
        platform=recipe.pip_platform,
        index_url=pip.index_url,
        extra_index_urls=extra,
        find_links=[link for link in pip.find_links if link],
    )


def uv_command() -> list[str]:
    """uv, from PATH or from the `uv` package (the build extra)."""
    found = shutil.which("uv")
    if found:
        return [found]
    if find_uv_bin is None:
        raise missing_build_extra("uv, the resolver `lock` uses,")
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


def resolve(
    inputs: LockInputs, uv: list[str] | None = None, timeout: float = 600, prefer: str = ""
) -> str:
    """The resolved set as uv writes it; a failed resolution is one line with uv's reason.

    prefer: a lock whose pins uv keeps where they still fit (uv's existing output file: its
    entries only, never an option a lock from elsewhere could carry), so that adding a package
    leaves the others, and the Horovod compiled against them, as they were."""
    argv = compile_argv(inputs, uv or uv_command())
    with tempfile.TemporaryDirectory(prefix="hvd-lock-") as folder:
        output = Path(folder) / "resolved.txt"
        output.write_text("".join(entries(prefer).values()))
        try:
            done = subprocess.run(
                [*argv, "--output-file", str(output)],
                input="\n".join(inputs.requirements) + "\n",
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise StepFailed(f"resolving the lock took more than {timeout:.0f} s") from None
        if done.returncode != 0:
            raise StepFailed(_failure(done.stderr, done.returncode))
        return output.read_text()


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
    for req in pip_requirements(recipe):
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


def changes(old: dict[str, Package], new: dict[str, Package]) -> list[str]:
    out = [f"+ {n} {new[n].version}" for n in sorted(new.keys() - old.keys())]
    out += [f"- {n} {old[n].version}" for n in sorted(old.keys() - new.keys())]
    out += [
        f"{n} {old[n].version} -> {new[n].version}"
        for n in sorted(old.keys() & new.keys())
        if old[n].version != new[n].version
    ]
    return out


def _index_hint(recipe: Recipe, failure: str) -> str:
    """Where a torch build that cannot be found was looked for, and where it is: said when the
    recipe takes torch from the host's pip configuration alone."""
    torch = recipe.pytorch
    if torch is None or torch.wheel_index != "pip-config":
        return ""
    missing = [pin for pin in pytorch.requirements(recipe) if "+" in pin and pin in failure]
    if not missing:
        return ""
    return (
        f"; {missing[0]} was looked for only on the indexes of this machine's pip configuration "
        "(pytorch.wheel_index: pip-config), and none of them has it: take it from PyTorch's "
        f"index (wheel_index: download.pytorch.org), or PyPI's own build, without +{torch.cuda_tag} "
        "(wheel_index: pypi)"
    )


def resolve_pin(recipe: Recipe, engine: Engine | None = None) -> BasePin:
    """Ask the registry, through the engine (its credentials and mirrors), for the digest of
    the recipe's base tag; never raises: a registry that cannot be asked gives an unpinned
    line with the reason."""
    image = recipe.base.image
    try:
        if engine is None:
            engine = open_engine(timeout=60)
        digest = engine.registry_digest(image, None)
    except (EngineError, UserError) as exc:
        return BasePin(image, None, brief(f"the registry could not be asked: {exc}", 200))
    if not digest or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        return BasePin(image, None, f"the registry gave no usable digest ({digest!r})")
    return BasePin(image, digest)


def base_changes(old: BasePin | None, new: BasePin | None) -> list[str]:
    if new is None or new.digest is None or (old is not None and old.digest == new.digest):
        return []
    if old is None or old.digest is None or old.image != new.image:
        return [f"+ base {new.image} {new.digest}"]
    return [f"base {new.image} {old.digest} -> {new.digest}"]


def lock_images(ref: str, arches: Sequence[str] = (), **options: Any) -> list[LockResult]:
    """lock_recipe for each image ref makes (arches: these instead of the recipe's own)."""
    return [
        replace(lock_recipe(ref, arch=arch, **options), arch=arch)
        for arch in image_arches(ref, arches)
    ]


def lock_recipe(
    ref: str,
    *,
    check: bool = False,
    upgrade: bool = False,
    pip: HostPipConfig | None = None,
    uv: list[str] | None = None,
    engine: Engine | None = None,
    on_step: Callable[[str], None] | None = None,
    arch: str | None = None,
) -> LockResult:
    """Resolve ref's recipe and write NAME.lock next to it (check: only say what would change);
    arch: the lock of that architecture's image, NAME.ARCH.lock where the recipe makes several.

    A lock made from the recipe's current inputs (its header's digest) is current: it comes
    back at once, with `check` after asking the registry whether the base tag moved; `upgrade`
    resolves again all the same. Raises UserError for every known incompatibility in the
    resolved set, and StepFailed when the packages cannot be resolved together.
    """
    step = on_step or (lambda _message: None)
    started = time.monotonic()
    step(f"reading recipe {ref}")
    recipe, path = recipe_lock_file(ref, arch)  # a stale lock is what this replaces
    inputs = lock_inputs(recipe, pip if pip is not None else pipconfig.read_host_pip_config())
    if not inputs.requirements:
        raise UserError(f"recipe {recipe.name}: nothing to lock (it installs no pip packages)")
    try:
        old_text = path.read_text()
    except FileNotFoundError:
        old_text = ""
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
    old_pin = read_pin(old_text)
    current = bool(old_text) and lock_digest(old_text) == inputs.digest() and not upgrade
    if current and not check:
        step(
            f"{path} is current: the recipe asks for what it was locked for (--upgrade resolves again)"
        )
        return LockResult(
            path, parse_lock(old_text), [], False, time.monotonic() - started, old_pin
        )
    pin = None
    if needs_pin(recipe):
        step(f"asking the registry for the digest of {recipe.base.image}")
        pin = resolve_pin(recipe, engine)
    if pin and pin.digest is None and old_pin and old_pin.image == pin.image and old_pin.digest:
        pin = old_pin  # a registry out of reach does not undo a pin
    if current:
        found = base_changes(old_pin, pin)
        return LockResult(path, parse_lock(old_text), found, False, time.monotonic() - started, pin)
    top = header(
        recipe.name,
        recipe.version,
        ref,
        inputs.python_version,
        inputs.platform,
        inputs.digest(),
        pin,
    )
    step(
        f"resolving {len(inputs.requirements)} requirements with uv for python "
        f"{inputs.python_version} on {inputs.platform}"
    )
    prefer = "" if upgrade else old_text or (inherited_lock(ref, arch) or "")
    if prefer and not old_text:
        step("starting from the pins of the lock of the recipe it extends (--upgrade: newest)")
    try:
        text = top + resolve(inputs, uv, prefer=prefer)
    except StepFailed as exc:
        raise StepFailed(f"{exc}{_index_hint(recipe, str(exc))}") from None
    packages = parse_lock(text)
    raise_problems([f"{path}: {problem}" for problem in resolved_problems(recipe, packages)])
    old = parse_lock(old_text) if old_text else {}
    found = base_changes(old_pin, pin) + changes(old, packages)
    write = not check and (found or not path.exists() or path.read_text() != text)
    if write:
        step(f"writing {path}")
        write_text(path, text)
    return LockResult(path, packages, found, bool(write), time.monotonic() - started, pin)
