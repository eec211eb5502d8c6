"""How a check is declared: `@check(name, about, needs=...)` over a function of the planned
launch. The general checks (launcher/checks/registry.py) and the rooms' own (launcher/runtimes/,
launcher/controllers/) declare theirs here; launcher/checks/registry.py judges a launch with all of
them. Kept apart so that a room, and the site model that holds the runtimes' profiles, load
no more than this to declare one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from hvd_container.launcher.checks.verdict import Verdict
    from hvd_container.launcher.plan.launch import Launch

Need = Literal["facts", "image", "allocation", "slurm", "gpus", "nodes"]
CheckFunction = Callable[["Launch"], "Verdict | None"]


@dataclass(frozen=True)
class Check:
    name: str
    about: str  # what it looks at: the text of a plain pass
    needs: tuple[Need, ...]
    function: CheckFunction
    owner: str  # the module that declared it


_DECLARED: dict[str, Check] = {}


def check(
    name: str, about: str, *, needs: tuple[Need, ...] = ()
) -> Callable[[CheckFunction], CheckFunction]:
    """Declare a check under `name` (once: a second check of that name is a programming error)."""

    def declare(function: CheckFunction) -> CheckFunction:
        if name in _DECLARED:
            raise RuntimeError(f"check {name!r} is declared twice")
        _DECLARED[name] = Check(name, about, needs, function, function.__module__)
        return function

    return declare


def declared() -> list[Check]:
    """The checks declared so far, in the order their modules were loaded."""
    return list(_DECLARED.values())
