"""hvd-pip and its build arg, declared just before the first pip install.

Declared here rather than after FROM: Docker re-runs every RUN after an ARG whose value changed,
so the base, python and MPI layers stay cached even when the pip config URL differs per build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import HVD_PIP, block

if TYPE_CHECKING:
    from hvd_container.containers.recipe import Recipe

CONFIG_URL_ARG = "HVD_PIP_CONFIG_URL"


def render(recipe: Recipe) -> str:
    return block(
        "frameworks",
        # Empty by default: hvd-pip then uses the image's own pip configuration.
        f"ARG {CONFIG_URL_ARG}=",
        f"COPY hvd-pip {HVD_PIP}",
        # The legacy builder has no COPY --chmod; the context's file mode is not guaranteed.
        f"RUN chmod 0755 {HVD_PIP}",
    )
