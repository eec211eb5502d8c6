"""The launch side's rooms, as rules on the source (run by `make lint` and the fast suite):

- what is special about a runtime lives in launcher/runtimes/<kind>.py: no other launch or CLI
  code compares anything with a runtime's kind;
- what is special about a controller lives in launcher/controllers/<name>.py: no other code
  compares anything with a controller's name;
- what `convert` does for a site runtime lives in containers/convert/<runtime>.py;
- a deferred import (inside a function) says in its comment what it saves, with a figure;
- a launch's partition, account, QOS, constraint and time fall back to the site's in one place
  (launcher/plan/scheduler_values.py): no other code reads the profile's defaults of them, so a check
  judges the value the script writes.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _source_tree import MODULES, ROOT
from hvd_container.launcher import controllers, runtimes

# "none" is also srun's --mpi=none and a site's gpu_request: the none runtime is told apart by
# its attributes (runs_image), never by its name
RUNTIME_KINDS = frozenset(runtimes.kinds()) - {"none"}
CONTROLLER_NAMES = frozenset(controllers.names())
CHECKED = ("hvd_container.launcher", "hvd_container.cli")


def _constants(node: ast.AST) -> list[str]:
    """The string constants a comparison operand holds: itself, or in a tuple/list/set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [v for element in node.elts for v in _constants(element)]
    return []


def branches(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """(line, name) of every comparison, match case or dict of cases on one of `names`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            values = [v for operand in (node.left, *node.comparators) for v in _constants(operand)]
        elif isinstance(node, ast.match_case):
            values = [v for sub in ast.walk(node.pattern) for v in _constants(sub)]
            node = node.pattern
        elif isinstance(node, ast.Dict):
            # a table of cases: every key one of the names (a table of options is not)
            values = [v for key in node.keys if key is not None for v in _constants(key)]
            if not values or not set(values) <= names:
                continue
        else:
            continue
        found += [(node.lineno, v) for v in values if v in names]
    return found


def _outside(room: str) -> dict[str, Path]:
    return {
        module: path
        for module, path in MODULES.items()
        if module.startswith(CHECKED) and not module.startswith(room + ".") and module != room
    }


def test_no_code_outside_runtimes_branches_on_a_runtime_kind() -> None:
    found = [
        f"{module}:{line}: {name!r}"
        for module, path in _outside("hvd_container.launcher.runtimes").items()
        for line, name in branches(path.read_text(), RUNTIME_KINDS)
    ]
    assert found == [], "move it into launcher/runtimes/<kind>.py (a method of the runtime)"


def test_no_code_outside_controllers_branches_on_a_controller() -> None:
    found = [
        f"{module}:{line}: {name!r}"
        for module, path in _outside("hvd_container.launcher.controllers").items()
        for line, name in branches(path.read_text(), CONTROLLER_NAMES)
    ]
    assert found == [], "move it into launcher/controllers/<name>.py (a method of the controller)"


def test_no_convert_code_outside_a_site_runtimes_module_branches_on_it() -> None:
    """`convert --to shifter|podman-hpc`: what is special about each lives in its module
    (containers/convert/shifter.py, podman_hpc.py, declared as PUBLISHER), not in the targets,
    the flags, the CLI or the JSON records."""
    from hvd_container.containers.convert.publisher import publishers

    names = frozenset(publishers())
    own = {f"hvd_container.containers.convert.{n.replace('-', '_')}" for n in names}
    found = [
        f"{module}:{line}: {name!r}"
        for module, path in MODULES.items()
        if module.startswith(("hvd_container.containers.convert", "hvd_container.cli"))
        and module not in own
        for line, name in branches(path.read_text(), names)
    ]
    assert found == [], "move it into containers/convert/<runtime>.py (its PUBLISHER)"


PLANTED = """
def compose(launch):
    if launch.runtime.kind == "shifter":
        return 1
    if kind in ("apptainer", "singularity"):
        return 2
    match launch.controller.name:
        case "gloo":
            return 3
    return {"pyxis": 4}[kind] + (launch.request.controller != "mpi")
"""


def test_the_rule_sees_planted_branches() -> None:
    assert branches(PLANTED, RUNTIME_KINDS) == [
        (3, "shifter"), (5, "apptainer"), (5, "singularity"), (10, "pyxis"),
    ]  # fmt: skip
    assert sorted(branches(PLANTED, CONTROLLER_NAMES)) == [(8, "gloo"), (10, "mpi")]


SCHEDULER_VALUES = frozenset({"partition", "account", "qos", "constraint", "time"})
# the profile's model, and the one function that resolves them
RESOLVER = ("hvd_container.launcher.plan.scheduler_values", "hvd_container.launcher.sites.model")


def scheduler_default_reads(source: str) -> list[tuple[int, str]]:
    """(line, name) where code reads a scheduler value's site default itself: `X.scheduler.time`,
    `sched.qos` (a name ending in sched or scheduler)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or node.attr not in SCHEDULER_VALUES:
            continue
        owner = node.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if name in ("sched", "scheduler"):
            found.append((node.lineno, node.attr))
    return found


def test_scheduler_values_fall_back_to_the_sites_in_one_place() -> None:
    found = [
        f"{module}:{line}: {name}"
        for module, path in MODULES.items()
        if module.startswith(CHECKED) and module not in RESOLVER
        for line, name in scheduler_default_reads(path.read_text())
    ]
    assert found == [], "read launch.scheduled (or scheduler_values(site) for the profile's own)"


# a test that replaced a function of launcher/slurm.py (setattr on the module, or by its dotted
# name) would test a Slurm nobody has: the tests use its seam, `slurm.using(FakeSlurm())`
_PATCHED_SLURM = re.compile(r"setattr\(\s*slurm\s*,|[\"']hvd_container\.launcher\.slurm\.\w+[\"']")


def test_no_test_replaces_a_function_of_the_slurm_module() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path.name != "test_architecture.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _PATCHED_SLURM.search(line)
    ]
    assert found == [], "put a fake in Slurm's place instead: the fake_slurm fixture"
    assert _PATCHED_SLURM.search('monkeypatch.setattr(slurm, "submit", f)')
    assert _PATCHED_SLURM.search('monkeypatch.setattr("hvd_container.launcher.slurm.cancel", f)')


def test_the_scheduler_rule_sees_planted_reads() -> None:
    planted = (
        "def f(launch, request, sched):\n"
        "    a = request.time or launch.site.scheduler.time\n"
        "    return sched.qos, sched.qos_max_time, launch.scheduled.partition\n"
    )
    assert scheduler_default_reads(planted) == [(2, "time"), (3, "qos")]


# a figure: "about 110 ms", "45 ms a call"
FIGURE = re.compile(r"\b[0-9]+(\.[0-9]+)? ?ms\b")


def _function_imports(source: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, list[str]]]:
    """Each import inside a function, with its comment: its own line, and the comment lines
    above it or above the imports it comes right after."""
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for sub in ast.walk(node):
            if not isinstance(sub, (ast.Import, ast.ImportFrom)):
                continue
            comment = [lines[sub.lineno - 1]]
            above = sub.lineno - 2
            while above >= 0 and lines[above].strip().startswith(("#", "from ", "import ")):
                comment.append(lines[above])
                above -= 1
            yield sub, comment


def deferred_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each import inside a function whose comment gives no figure."""
    found = []
    for sub, comment in _function_imports(source):
        if not any(FIGURE.search(line) for line in comment):
            name = sub.module if isinstance(sub, ast.ImportFrom) else sub.names[0].name
            found.append((sub.lineno, str(name)))
    return found


def test_every_deferred_import_says_what_it_saves() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in MODULES.values()
        for line, name in deferred_imports(path.read_text())
    ]
    assert found == [], "import it at the top, or give the figure it saves in a comment"


def deferred_with_figures(source: str) -> list[tuple[int, str, float]]:
    """(line, module, milliseconds its comment says it saves) of each import in a function."""
    found = []
    for sub, comment in _function_imports(source):
        figure = next((FIGURE.search(line) for line in comment if FIGURE.search(line)), None)
        if figure is None:
            continue
        if isinstance(sub, ast.ImportFrom):
            name = str(sub.module)
            inner = f"{name}.{sub.names[0].name}"
            name = inner if _is_module(inner) else name
        else:
            name = sub.names[0].name
        found.append((sub.lineno, name, float(figure.group(0).rstrip("ms ").strip())))
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def saved_ms(
    importer: str, deferred: str, tries: int = 3, enough: Callable[[float], bool] | None = None
) -> float:
    """What importing `deferred` costs once `importer` is loaded (its own imports done): the
    cumulative figure of `python -X importtime`, the least of a few tries (fewer where a figure
    is already `enough`); 0 when `importer` loads it anyway."""
    code = f"import sys, {importer}; sys.stderr.write('--\\n'); import {deferred}"
    best = float("inf")
    for _ in range(tries):
        if enough is not None and enough(best):
            break
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-500:]
        after = done.stderr.split("--\n", 1)[1]
        cost = 0.0
        for line in after.splitlines():
            fields = [f.strip() for f in line.removeprefix("import time:").split("|")]
            if len(fields) == 3 and fields[2] == deferred:
                cost = int(fields[1]) / 1000
        best = min(best, cost)
    return best


def test_every_deferred_import_saves_about_what_its_comment_says() -> None:
    """Measured here: a deferral that saves nothing (the importer loads the module anyway) or
    whose figure is off by more than a factor of 10 fails."""
    wrong = []
    for module, path in MODULES.items():
        for line, name, stated in deferred_with_figures(path.read_text()):
            # a first figure well inside the bounds needs no second try (a busy machine only
            # makes a figure larger: the least of three judges one that looks too large)
            saved = saved_ms(module, name, enough=lambda ms, s=stated: s / 5 <= ms <= s * 5)
            if saved < 1.0 or not stated / 10 <= saved <= stated * 10:
                wrong.append(
                    f"{path.relative_to(ROOT)}:{line}: {name} says {stated:g} ms, saves {saved:.1f} ms"
                )
    assert wrong == []


def test_the_import_rule_sees_a_planted_deferred_import() -> None:
    planted = (
        "def f():\n    import json\n"
        "def g():\n    # the SDK only here: about 110 ms\n    import docker\n"
        "def h():\n    import yaml  # 12 ms\n"
    )
    assert deferred_imports(planted) == [(2, "json")]


def test_the_measure_sees_a_deferral_that_saves_nothing() -> None:
    # the profile loader reads YAML: deferring yaml there would save nothing
    assert saved_ms("hvd_container.launcher.sites.loader", "yaml", tries=1) == 0.0
    assert saved_ms("hvd_container.core.errors", "yaml", tries=1) > 0.0


# Models hold data: loading one never loads what finds, judges or renders (the loaders beside
# the models ask the registries: containers/recipe_loader.py the blocks and the rules).
MODELS = (
    "hvd_container.launcher.sites.model",
    "hvd_container.launcher.plan.launch",
    "hvd_container.facts",
    "hvd_container.containers.recipe",
)
REGISTRIES = (
    "hvd_container.launcher.checks.registry",
    "hvd_container.launcher.controllers",
    "hvd_container.containers.blocks",
    "hvd_container.containers.compat",
)


@pytest.mark.parametrize("model", MODELS)
def test_loading_a_model_loads_no_registry(model: str) -> None:
    code = f"import sys, {model}; print(*sorted(set(sys.modules) & {set(REGISTRIES)!r}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split() == [], f"importing {model} loads {done.stdout.strip()}"


UNTYPED_PRINT = "def f(site, n: int):\n    print(n)\n"


@pytest.mark.parametrize(
    ("where", "codes"),
    [
        ("launcher/planted.py", {"ANN001", "ANN201", "T201"}),
        ("hvd_container/cli/commands/run.py", {"ANN001", "ANN201"}),
        ("containers/planted.py", {"ANN001", "ANN201", "T201"}),
        ("recipes/planted.py", {"ANN001", "ANN201", "T201"}),
        ("hvd_container/cli/app.py", {"ANN001", "ANN201"}),
        ("launcher/programs/planted.py", set()),
        ("tests/unit/planted.py", set()),
    ],
)
def test_ruffs_rules_see_a_planted_function_where_they_apply(where: str, codes: set[str]) -> None:
    """Type hints in every package (ANN), no print() in library code (T20):
    the tool's own rules, configured in pyproject.toml, read the file as if it were there."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "json",
         "--stdin-filename", where, "-"],
        input=UNTYPED_PRINT, capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    found = {item["code"] for item in json.loads(done.stdout)}
    assert found & {"ANN001", "ANN201", "T201"} == codes, found
