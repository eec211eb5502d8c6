"""Finding the rooms of the launch side: every runtime (launcher/runtimes/<kind>.py) and every
controller (launcher/controllers/<name>.py) is a class in a file of its package, found by
listing the package, so that a new one is one new file."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import TypeVar

C = TypeVar("C")


def classes_in(package: str, path: Iterable[str], base: type[C]) -> list[type[C]]:
    """The subclasses of `base` defined in the modules of `package` (at `path`), by module
    name; a module whose name starts with _ holds what several of them share."""
    found: list[type[C]] = []
    for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        found += [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, base)
            and value.__module__ == module.__name__
        ]
    return found
