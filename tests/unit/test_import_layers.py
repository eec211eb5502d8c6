"""The architecture as rules on imports, read from the source (every import, lazy ones too);
the layers themselves are import-linter's contracts (pyproject.toml, `make lint`).

    hvd_container.core            errors, YAML loading, models, atomic writes: none of the rest
    hvd_container.facts           the image's facts (labels): the core only
    hvd_container.containers      build side: the core and the facts (never the launch side)
    hvd_container.launcher        launch side: the core, the facts and the build side's readers
                                  (LAUNCH_READS: SIF files, built-in recipes, a local image's
                                  labels through the engine interface)
    hvd_container.cli             parses, calls one library function, prints

Run by `make lint` and by the fast suite.
"""

from __future__ import annotations

import ast
from pathlib import Path

from _source_tree import MODULES, OLD_TOP_LEVEL, PACKAGE_DIRS, PYPROJECT, ROOT, _imports


def test_package_list_matches_the_folders_holding_an_init() -> None:
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    on_disk = set()
    for prefix, folder in PACKAGE_DIRS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rest = init.parent.relative_to(ROOT / folder).parts
            name = ".".join((prefix, *rest))
            # a mapped folder nested in another's is listed under its own prefix only
            if any(
                p != prefix and name.startswith(p)
                for p in PACKAGE_DIRS
                if p.startswith(prefix + ".")
            ):
                continue  # fmt: skip
            on_disk.add(name)
    assert listed == on_disk


def test_no_module_imports_the_old_top_level_names() -> None:
    files = [*MODULES.values(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").glob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in files
        for line, name in _imports(path, import_time_only=False)
        if name.split(".")[0] in OLD_TOP_LEVEL
    ]
    assert found == []


# The layers (core < facts < build side < launch side < CLI), typer for the CLI alone and the
# Docker client behind containers/engine are import-linter's contracts in pyproject.toml, checked
# by `make lint`; the rules below are the project's own, which no contract type says.


# what the launch side may use of the build side: it reads images and recipes, never builds
LAUNCH_READS = (
    "hvd_container.containers.sif.format",  # is it a SIF?
    "hvd_container.containers.sif.reader",  # a SIF's labels and arch
    "hvd_container.containers.sif.environment",  # a SIF's environment (ch-run)
    "hvd_container.containers.signing",  # a SIF's signatures checked (check_sif reads only)
    "hvd_container.containers.recipe",  # the recipe model
    "hvd_container.containers.recipe_loader",  # a built-in recipe's facts, --recipe
    "hvd_container.containers.engine",  # a local image's labels (open_engine, inspect only)
)


def test_the_launch_side_uses_only_the_build_sides_readers() -> None:
    found = [
        f"{module}:{line} imports {name}"
        for module, path in MODULES.items()
        if _under(module, "hvd_container.launcher")
        for line, name in _imports(path, import_time_only=False)
        if _under(name, "hvd_container.containers") and name not in LAUNCH_READS
    ]
    assert found == [], "read what the build side wrote through one of LAUNCH_READS"


def test_the_launch_side_asks_the_engine_only_to_inspect() -> None:
    """The engine backend is a reader for the launch side only: inspect, never build or run."""
    calls = [
        node.func.attr
        for module, path in MODULES.items()
        if _under(module, "hvd_container.launcher")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Call)
        and getattr(node.func.value.func, "id", None) == "open_engine"
    ]
    assert calls and set(calls) == {"inspect"}, calls


def test_engines_are_made_by_the_factory_alone() -> None:
    """open_engine (containers/engine/__init__.py) makes every engine: no other module names a
    backend's class, so a command's engine is chosen in one place."""
    found = [
        f"{module}:{node.lineno}"
        for module, path in MODULES.items()
        if not _under(module, "hvd_container.containers.engine")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Name) and node.id == "DockerEngine"
    ]
    assert found == []


def test_only_the_engine_backend_imports_the_docker_client() -> None:
    found = [
        f"{module}:{line} imports {name}"
        for module, path in MODULES.items()
        if not _under(module, "hvd_container.containers.engine")
        for line, name in _imports(path, import_time_only=False)
        if _under(name, "docker")
    ]
    assert found == []


def test_only_the_engine_package_imports_its_backends() -> None:
    """The CLI, push, convert and the launch side use the engine interface
    (containers/engine/__init__.py): no module outside containers/engine names a backend's
    module, so a backend is replaced in one folder."""
    backends = (
        "hvd_container.containers.engine.docker_api",
        "hvd_container.containers.engine.podman",
    )
    found = [
        f"{module}:{line} imports {name}"
        for module, path in MODULES.items()
        if not _under(module, "hvd_container.containers.engine")
        for line, name in _imports(path, import_time_only=False)
        if any(_under(name, backend) for backend in backends)
    ]
    assert found == []


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _cycle() -> list[str] | None:
    graph = {
        module: sorted({n for _, n in _imports(path, import_time_only=True) if n in MODULES} - {module})
        for module, path in MODULES.items()
    }  # fmt: skip
    # a package imports its parent package implicitly; only explicit edges count
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for module in graph:
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def test_no_import_cycles_at_import_time() -> None:
    assert _cycle() is None


def test_the_checker_sees_a_planted_violation(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import os\n"
        "def f():\n"
        "    from hvd_container.launcher import sites\n"
        "if TYPE_CHECKING:\n"
        "    from hvd_container.cli import app\n"
    )
    assert _imports(planted, import_time_only=False) == [
        (1, "os"),
        (3, "hvd_container.launcher.sites"),
        (5, "hvd_container.cli.app"),
    ]
    assert _imports(planted, import_time_only=True) == [(1, "os")]


NO_PROMPTING = ("hvd_container.containers", "hvd_container.launcher")


def test_library_code_never_prompts() -> None:
    """The CLI owns the terminal: library code asks through the reporter it is handed (ruff's
    T20 keeps it from printing, tests/unit/test_architecture.py; no rule of a tool sees input())."""
    found = []
    for module, path in MODULES.items():
        if not any(_under(module, p) for p in NO_PROMPTING):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            called = node.func if isinstance(node, ast.Call) else None
            if isinstance(called, ast.Name) and called.id == "input":
                found.append(f"{module}:{node.lineno}: input()")
    assert found == []
