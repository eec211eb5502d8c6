"""The project's source tree as the architecture tests read it: every module of the installed
namespace and the imports each one makes."""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGE_DIRS: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
OLD_TOP_LEVEL = ("containers", "launcher", "recipes")


def _folder(package: str) -> Path:
    """The source folder of a package, through the package-dir mapping."""
    for prefix in sorted(PACKAGE_DIRS, key=len, reverse=True):
        if package == prefix or package.startswith(prefix + "."):
            rest = package[len(prefix) :].strip(".")
            return (
                ROOT / PACKAGE_DIRS[prefix] / Path(*rest.split("."))
                if rest
                else ROOT / PACKAGE_DIRS[prefix]
            )
    raise AssertionError(f"{package}: no package-dir entry")  # fmt: skip


def _modules() -> dict[str, Path]:
    """Every module of the installed namespace -> its source file."""
    found: dict[str, Path] = {}
    for package in PYPROJECT["tool"]["setuptools"]["packages"]:
        folder = _folder(package)
        for path in sorted(folder.glob("*.py")):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            found[name] = path
    return found


MODULES = _modules()


def _imports(path: Path, *, import_time_only: bool) -> list[tuple[int, str]]:
    """(line, imported module) for each import in the file; with import_time_only, only the
    imports that run when the module is imported (not in functions or `if TYPE_CHECKING`)."""
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if not import_time_only:
                    visit(child, False)
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                if not import_time_only:
                    visit(child, top)
                continue
            if isinstance(child, ast.Import):
                out.extend((child.lineno, alias.name) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                for alias in child.names:
                    sub = f"{child.module}.{alias.name}"
                    out.append((child.lineno, sub if sub in MODULES else child.module))
            visit(child, top)

    visit(tree, True)
    return out
