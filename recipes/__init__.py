"""Built-in recipes, shipped as package data: the *.yaml files (and their locks) beside this one."""

from pathlib import Path


def path() -> Path:
    return Path(__file__).parent


def names() -> list[str]:
    """The built-in recipes' names."""
    return sorted(p.stem for p in path().glob("*.yaml"))
