"""hvd-pip and its build arg, declared just before the first pip install.

Declared here rather than after FROM: Docker re-runs every RUN after an ARG whose value changed,
so the base, python and MPI layers stay cached even when the pip config URL differs per build.
"""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import HVD_PIP, block, run
from hvd_container.containers.instructions import Arg, Copy

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe

CONFIG_URL_ARG = "HVD_PIP_CONFIG_URL"


def render(recipe: LockedRecipe) -> Block | None:
    return block(
        "frameworks",
        # Empty by default: hvd-pip then uses the image's own pip configuration. A definition
        # file takes it from the builder's environment.
        Arg(CONFIG_URL_ARG, "", passthrough=True),
        Copy("hvd-pip", HVD_PIP, hvd_pip_script()),
        # The legacy builder has no COPY --chmod; the context's file mode is not guaranteed.
        run(f"chmod 0755 {HVD_PIP}"),
    )


def hvd_pip_script() -> bytes:
    """The hvd-pip wrapper copied into every image (see hvd-pip.sh)."""
    return files("hvd_container.containers.blocks").joinpath("hvd-pip.sh").read_bytes()
