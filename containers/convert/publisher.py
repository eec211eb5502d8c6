"""A site runtime that runs images from its own store (Shifter's gateway, podman-hpc's squashed
store) is a `convert --to` target: the image is pushed to the site's registry, then the site's
tool fetches it. Each such runtime declares itself in its own module, as `PUBLISHER`
(containers/convert/shifter.py, podman_hpc.py); `publishers()` finds them, and the targets,
the flags that go with them and the JSON record's values are made from that list.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

Fetch = Callable[[str, "str | None", Callable[[str], None]], str]


@dataclass(frozen=True)
class SitePublisher:
    """`--to target`: after the push, `fetch(remote, login_host, step)` has the site's tool
    (`tool`, run here or over ssh on the login host) take the image; the runtime's reference."""

    target: str
    tool: str
    fetch: Fetch


@cache
def publishers() -> dict[str, SitePublisher]:
    """Every site publisher, by its --to name, from the modules of this package."""
    package = importlib.import_module(__package__ or "hvd_container.containers.convert")
    found: dict[str, SitePublisher] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        declared = getattr(module, "PUBLISHER", None)
        if isinstance(declared, SitePublisher):
            found[declared.target] = declared
    return found
