"""Finding the rooms of the launch side: every runtime (launcher/runtimes/<kind>.py) and every
controller (launcher/controllers/<name>.py) is a class in a file of its package, found by
listing the package, so that a new one is one new file."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import TypeVar

C = TypeVar("C")


def room_names(path: Iterable[str]) -> list[str]:
    """The names of the rooms' modules at `path`, sorted; a module whose name starts with _
    holds what several of them share."""
    return sorted(i.name for i in pkgutil.iter_modules(path) if not i.name.startswith("_"))


def classes_in(
    package: str, path: Iterable[str], base: type[C], names: Iterable[str] | None = None
) -> list[type[C]]:
    """The subclasses of `base` defined in the modules of `package` (at `path`), by module
    name; `names`: only in those of its modules (each one of room_names)."""
    found: list[type[C]] = []
    for name in room_names(path) if names is None else names:
        module = importlib.import_module(f"{package}.{name}")
        found += [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, base)
            and value.__module__ == module.__name__
        ]
    return found
