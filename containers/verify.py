"""Prove that an image does what its recipe says, and record the facts as labels.

`horovodrun --check-build` always exits 0, so its output is parsed and compared with the recipe
(frameworks, controllers, tensor operations); each framework's `hvd.init()` is run; then the
recipe's own checks. The facts (versions, check-build result, arch, digest) become
`org.hvd-container.*` labels that later steps (SIF conversion, launch preflight) read without
running the image.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hvd_container.containers.engine import CommandNotFound, EngineError, EngineUnreachable
from hvd_container.containers.recipe_loader import image_arches, list_builtin, load_recipe

from hvd_container import facts as labels_of
from hvd_container import known_bad
from hvd_container.core.errors import StepFailed, UserError, brief
from hvd_container.core.programs import program_text

if TYPE_CHECKING:
    from hvd_container.containers.engine import Engine
    from hvd_container.containers.recipe import LockedRecipe, Recipe

CHECK_BUILD = ["horovodrun", "--check-build"]

# Framework names in `--check-build` output -> recipe spelling.
_FRAMEWORKS = {"tensorflow": "tensorflow", "pytorch": "pytorch", "mxnet": "mxnet"}
_INIT = {
    "pytorch": "import horovod.torch as hvd; hvd.init(); assert hvd.size() >= 1; print(hvd.rank())",
    "tensorflow": "import horovod.tensorflow as hvd; hvd.init(); print(hvd.rank())",
    "keras": "import horovod.tensorflow.keras as hvd; hvd.init(); print(hvd.rank())",
}

# prints the package versions the image really has, as JSON (containers/programs/)
# dlopen of the unversioned name, in a python of its own (torch's own libcudart.so.N, loaded by
# its RPATH, does not count): what the AWS OFI NCCL plugin linked to CUDA dynamically does when
# NCCL starts it (CSCS's Container Engine hooks; cscs-docs, container-engine/known-issue.md)
CUDART_PROBE = ["python", "-c", "import ctypes; ctypes.CDLL('libcudart.so')"]
CUDART_MISSING = (
    "the image's CUDA runtime has no unversioned libcudart.so on the loader's path: at CSCS "
    '(Container Engine, AWS OFI NCCL hook) NCCL fails when it starts ("libcudart.so could not '
    "be found\"); hvd-container's GPU recipes make the link, or add it to the image (ln -s "
    "libcudart.so.N libcudart.so where libcudart.so.N lies, then ldconfig)"
)
VERSIONS_SCRIPT = program_text("hvd_container.containers", "verify_versions.py")


@dataclass(frozen=True)
class CheckBuild:
    """Parsed `horovodrun --check-build`: the names marked [X] in each block, lower case."""

    version: str | None
    frameworks: frozenset[str]
    controllers: frozenset[str]
    tensor_ops: frozenset[str]


_BLOCKS = {
    "available frameworks": "frameworks",
    "available controllers": "controllers",
    "available tensor operations": "tensor_ops",
}


def parse_check_build(text: str) -> CheckBuild:
    """Parse check-build output; raises ValueError if it has none of the three blocks."""
    found: dict[str, set[str]] = {v: set() for v in _BLOCKS.values()}
    seen: set[str] = set()
    current: str | None = None
    version = None
    for raw in text.splitlines():
        line = raw.strip()
        m = re.match(r"^Horovod v(\S+?):?$", line)
        if m:
            version = m[1]
            continue
        head = line.rstrip(":").lower()
        if head in _BLOCKS:
            current = _BLOCKS[head]
            seen.add(current)
            continue
        m = re.match(r"^\[([Xx ])\]\s+(.+)$", line)
        if m and current:
            if m[1] in "Xx":
                found[current].add(m[2].strip().lower())
            continue
        if line and not m:
            current = None if line.endswith(":") else current
    if not seen:
        raise ValueError("no 'Available Frameworks/Controllers/Tensor Operations' blocks found")
    return CheckBuild(
        version,
        frozenset(found["frameworks"]),
        frozenset(found["controllers"]),
        frozenset(found["tensor_ops"]),
    )


def expected_check_build(recipe: Recipe) -> CheckBuild:
    """What check-build must report for the recipe."""
    hv = recipe.horovod
    assert hv is not None
    frameworks = {"tensorflow" if f == "keras" else f for f in hv.frameworks}
    controllers: set[str] = set(hv.controllers)
    ops = set(controllers)  # plain names: the GPU operations (nccl, mpi) join the controllers
    if hv.gpu_operations:
        ops.add(hv.gpu_operations)
    return CheckBuild(hv.version, frozenset(frameworks), frozenset(controllers), frozenset(ops))


def compare_check_build(expected: CheckBuild, actual: CheckBuild) -> list[str]:
    """Mismatches as readable strings; empty when the image has everything the recipe asks."""
    problems = []
    if expected.version and actual.version and expected.version != actual.version:
        problems.append(f"Horovod {actual.version}, recipe says {expected.version}")
    for what in ("frameworks", "controllers", "tensor_ops"):
        missing = sorted(getattr(expected, what) - getattr(actual, what))
        if missing:
            label = what.replace("_", " ")
            problems.append(f"{label} missing: {', '.join(missing)}")
    return problems


def parse_versions(output: str) -> dict[str, str]:
    for line in output.splitlines():
        if line.startswith("HVD-VERSIONS "):
            data = json.loads(line[len("HVD-VERSIONS ") :])
            return {str(k): str(v) for k, v in data.items()}
    raise ValueError("the version probe printed nothing")


def mpi_version(line: str) -> str:
    """'mpirun (Open MPI) 4.1.4' -> '4.1.4'; '' when there is no MPI."""
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", line)
    return m[1] if m else ""


@dataclass
class VerifyResult:
    image: str
    check_build: CheckBuild | None
    versions: dict[str, str]
    arch: str
    problems: list[str] = field(default_factory=list)
    checks_run: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # known-bad versions: said, not refused
    cudart_link: bool | None = None  # the unversioned libcudart.so loads; None: no CUDA or not run

    @property
    def ok(self) -> bool:
        return not self.problems


def fact_labels(result: VerifyResult, recipe: Recipe | None) -> dict[str, str]:
    """The org.hvd-container.* labels recording what verification found."""
    cb = result.check_build
    versions = dict(result.versions)
    backends = versions.pop("torch.distributed", None)
    archs = versions.pop("torch.cuda_archs", None)
    if "mpi" in versions:
        versions["mpi"] = mpi_version(versions["mpi"])
    return labels_of.verified_labels(
        arch=result.arch,
        horovod=(cb.frameworks, cb.controllers, cb.tensor_ops) if cb is not None else None,
        versions=versions,
        ok=result.ok,
        recipe=recipe,
        torch_backends=backends.split(",") if backends is not None else None,
        torch_cuda_archs=archs.split(",") if archs else None,
        cudart_link=result.cudart_link,
    )


Runner = Callable[[list[str]], tuple[int, str]]


def verify_image(
    image: str,
    run: Runner,
    arch: str,
    recipe: Recipe | None = None,
    on_step: Callable[[str], None] | None = None,
    labels: Mapping[str, str] | None = None,
) -> VerifyResult:
    """Run the checks with run(argv) -> (exit code, output) inside the image.

    The expectations come from the recipe; without one, from the facts an earlier verification
    recorded in the image's labels (check-build result, versions); without those either, from
    nothing: check-build is parsed and recorded, and each framework it reports gets its
    hvd.init() run. An image without Horovod (recipe or labels say so) skips check-build.
    """
    note = on_step or (lambda _msg: None)
    result = VerifyResult(image, None, {}, arch)
    facts = labels if recipe is None and labels and _has_facts(labels) else None
    expected: CheckBuild | None = None
    if recipe is not None:
        expected = expected_check_build(recipe) if recipe.horovod is not None else None
        wants_horovod = recipe.horovod is not None
    elif facts is not None:
        expected = labelled_check_build(facts)
        wants_horovod = expected is not None
    else:
        wants_horovod = True

    if wants_horovod:
        note(" ".join(CHECK_BUILD))
        code, out = run(CHECK_BUILD)
        try:
            result.check_build = parse_check_build(out)
        except ValueError:
            result.problems.append(f"`horovodrun --check-build` failed (exit {code}): {_last(out)}")
    wanted_arch = recipe.arch if recipe is not None else (facts or {}).get(labels_of.ARCH)
    if wanted_arch and wanted_arch != arch:
        source = "recipe says" if recipe is not None else "its labels say"
        result.problems.append(f"image arch {arch}, {source} {wanted_arch}")
    if expected is not None and result.check_build is not None:
        result.problems += compare_check_build(expected, result.check_build)

    code, out = run(["python", "-c", VERSIONS_SCRIPT])
    try:
        result.versions = parse_versions(out)
    except ValueError:
        result.problems.append(f"version probe failed (exit {code}): {_last(out)}")
    for entry, version in known_bad.problems(result.versions):
        said = (
            f"{entry.library} {version} is known-bad: {entry.effect} ({entry.source}): {entry.fix}"
        )
        result.warnings.append(said)
        note(f"warning: {said}")
    if result.versions.get("cuda"):
        note("libcudart.so")
        result.checks_run.append("libcudart.so")
        code, _out = run(CUDART_PROBE)
        result.cudart_link = code == 0
        if not result.cudart_link:
            result.warnings.append(CUDART_MISSING)
            note(f"warning: {CUDART_MISSING}")
    if recipe is not None:
        result.problems += compare_versions(recipe, result.versions)
    elif facts is not None and result.versions:
        result.problems += compare_labelled_versions(facts, result.versions)

    if recipe is not None and recipe.horovod is None and recipe.pytorch is not None:
        result.problems += torch_distributed_problems(recipe, result.versions)
        result.checks_run.append("torch.distributed backends")

    frameworks: Iterable[str]
    if recipe is not None and recipe.horovod is not None:
        frameworks = recipe.horovod.frameworks
    elif expected is not None:
        frameworks = sorted(expected.frameworks)
    else:
        frameworks = sorted(result.check_build.frameworks) if result.check_build else []
    for fw in frameworks:
        snippet = _INIT.get(fw)
        if snippet is None:
            continue
        note(f"hvd.init() with {fw}")
        result.checks_run.append(f"hvd.init {fw}")
        code, out = run(["python", "-c", snippet])
        if code != 0:
            result.problems.append(f"hvd.init() with {fw} failed (exit {code}): {_last(out)}")

    for check in recipe.checks if recipe is not None else []:
        note(check)
        result.checks_run.append(check)
        code, out = run(["sh", "-c", check])
        if code != 0:
            result.problems.append(f"check `{check}` failed (exit {code}): {_last(out)}")
    return result


def torch_distributed_problems(recipe: Recipe, versions: Mapping[str, str]) -> list[str]:
    """An image without Horovod trains with torch.distributed: gloo for CPU ranks, and NCCL
    where the recipe has CUDA (is_gloo_available(), is_nccl_available() in the image)."""
    found = versions.get("torch.distributed")
    if found is None:
        return [
            "torch.distributed is not available in the image (torch.distributed.is_available() is False, or torch did not import)"
        ]
    have = set(found.split(",")) - {""}
    wanted = ["gloo"] + (["nccl"] if recipe.gpu else [])
    return [
        f"torch.distributed has no {name} backend (is_{name}_available() is False; it has {', '.join(sorted(have)) or 'none'})"
        for name in wanted
        if name not in have
    ]


def _has_facts(labels: Mapping[str, str]) -> bool:
    """Whether labels carry what a verification recorded (fact_labels)."""
    return labels.get(labels_of.VERIFIED) == "true"


def labelled_check_build(labels: Mapping[str, str]) -> CheckBuild | None:
    """The check-build result recorded in the labels; None when they record no Horovod."""
    if labels_of.HOROVOD_FRAMEWORKS not in labels:
        return None

    def names(key: str) -> frozenset[str]:
        return frozenset(n for n in labels.get(key, "").split(",") if n)

    return CheckBuild(
        labels.get(labels_of.VERSIONS + "horovod") or None,
        names(labels_of.HOROVOD_FRAMEWORKS),
        names(labels_of.HOROVOD_CONTROLLERS),
        names(labels_of.HOROVOD_TENSOR_OPS),
    )


def compare_labelled_versions(labels: Mapping[str, str], versions: Mapping[str, str]) -> list[str]:
    """Framework versions in the image against those its labels recorded."""
    problems = []
    for key in ("torch", "tensorflow", "horovod", "lightning"):
        want = labels.get(labels_of.VERSIONS + key)
        if not want:
            continue
        have = versions.get(key)
        if have is None:
            problems.append(f"{key} is not installed, its labels say {want}")
        elif have != want:
            problems.append(f"{key} {have} installed, its labels say {want}")
    return problems


def compare_versions(recipe: Recipe, versions: dict[str, str]) -> list[str]:
    """Framework versions in the image against the recipe (local tags like +cpu ignored)."""
    wanted = {
        "torch": recipe.pytorch.version if recipe.pytorch else None,
        "tensorflow": recipe.tensorflow.version if recipe.tensorflow else None,
        "horovod": recipe.horovod.version if recipe.horovod else None,
        "lightning": recipe.lightning.version if recipe.lightning else None,
    }
    problems = []
    for key, want in wanted.items():
        if not want:
            continue
        have = versions.get(key)
        if have is None:
            problems.append(f"{key} is not installed, recipe says {want}")
        elif not _same_release(have, want):
            problems.append(f"{key} {have} installed, recipe says {want}")
    return problems


def _same_release(have: str, want: str) -> bool:
    have_base = have.split("+", 1)[0]
    want_base = str(want).split("+", 1)[0]
    return have_base == want_base or have_base.startswith(want_base + ".")


def _last(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


def require_ok(result: VerifyResult) -> None:
    if not result.ok:
        raise StepFailed(f"verification of {result.image} failed: {'; '.join(result.problems)}")


def docker_runner(engine: Engine, image: str, timeout: int = 600) -> Runner:
    """run(argv) in a fresh container of image (the engine removes it afterwards).

    A command the image does not have gives exit 127 and the engine's reason as output (the
    checks then report it as a problem); a check running longer than timeout seconds, or an
    engine that stops answering, is a StepFailed.
    """

    def run(argv: list[str]) -> tuple[int, str]:
        what = f"verification of {image}: `{brief(' '.join(argv), 60)}`"
        try:
            return engine.run(image, argv, timeout=timeout, labels={labels_of.VERIFY_RUN: "1"})
        except CommandNotFound as exc:
            return 127, str(exc)
        except EngineUnreachable as exc:
            if exc.timed_out:
                raise StepFailed(f"{what} did not finish within {timeout} s") from None
            raise StepFailed(f"{what}: the Docker engine did not answer ({_reason(exc)})") from None
        except EngineError as exc:
            raise StepFailed(f"{what} could not run: {_api_reason(exc)}") from None

    return run


def _api_reason(exc: Any) -> str:
    text = str(getattr(exc, "explanation", None) or exc)
    return " ".join(text.split())


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(frozen=True)
class Verified:
    """A local image verified again: what it was compared with, the result, its facts."""

    against: str
    result: VerifyResult
    labels: dict[str, str]
    note: str | None  # said before the checks (the labelled recipe is not a built-in one)


def _image_recipe(ref: str, arch: str) -> LockedRecipe:
    """The recipe an image was built from: of a recipe that makes several, the image's arch's."""
    several = image_arches(ref) != [None]
    return load_recipe(ref, arch if several and arch != "unknown" else None)


def verify_existing(
    engine: Engine,
    image: str,
    recipe_ref: str | None,
    on_step: Callable[[str], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Verified:
    """Verify a local image again. What it is compared with, first that exists: the recipe
    named by `recipe_ref`, the built-in recipe its labels name, the facts an earlier
    verification recorded in its labels, else its own check-build."""

    info = engine.inspect(image)
    if info is None:
        raise UserError(f"image {image} does not exist locally")
    labels = (info.get("Config") or {}).get("Labels") or {}
    named = labels.get(labels_of.RECIPE_NAME)
    recipe = None
    arch = str(info.get("Architecture") or "unknown")
    if recipe_ref:
        recipe = _image_recipe(recipe_ref, arch)
    elif named and named in list_builtin():
        recipe = _image_recipe(named, arch)
    if recipe is not None:
        against = f"recipe {recipe.name} {recipe.version}"
    elif _has_facts(labels):
        against = "the facts recorded in its labels"
    else:
        against = "its own check-build"
    note = None
    if named and recipe is None:
        note = f"{image}: recipe {named} is not built in; verifying against {against}"
        if on_note is not None:
            on_note(note)
    run = docker_runner(engine, image)
    result = verify_image(image, run, arch, recipe, on_step=on_step, labels=labels)
    return Verified(against, result, fact_labels(result, recipe), note)
