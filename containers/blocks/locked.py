"""The recipe's lock (NAME.lock, see containers/lockfile.py), installed exactly: every package at
its locked version, each file checked against its hash, nothing resolved inside the image.

Horovod is the one package left out here: it is built from its sdist by the horovod block,
with the hash from the same lock. The frameworks' blocks then only check their versions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks import pytorch
from hvd_container.containers.blocks._text import block, pip_install, run
from hvd_container.containers.instructions import Copy
from hvd_container.containers.lockfile import without

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe

LOCK_DIR = "/opt/hvd"
LOCK_FILE = f"{LOCK_DIR}/requirements.lock"
HOROVOD_LOCK_FILE = f"{LOCK_DIR}/horovod.lock"


def parts(recipe: LockedRecipe) -> tuple[str, str]:
    """(the lock without Horovod, Horovod's own entry); both empty without a lock."""
    return without(recipe.lock, "horovod") if recipe.lock else ("", "")


def render(recipe: LockedRecipe) -> Block | None:
    if recipe.lock is None:
        return None
    packages, _horovod = parts(recipe)
    url = pytorch.index_url(recipe)  # where the locked torch files are (hashes still checked)
    index = [f"--extra-index-url {url}"] if url else []
    return block(
        "frameworks",
        Copy("requirements.lock", LOCK_FILE, packages.encode()),
        run(pip_install("--require-hashes", "--no-deps", *index, "-r", LOCK_FILE)),
    )
