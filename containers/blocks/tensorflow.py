"""TensorFlow from wheels (or the base image's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import block, module_version_check, pip_install, run

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe


def render(recipe: LockedRecipe) -> Block | None:
    tf = recipe.tensorflow
    if tf is None:
        return None
    if tf.source == "image" or recipe.lock is not None:  # the base image or the lock has it
        return block("frameworks", run(module_version_check("tensorflow", tf.version)))
    return block("frameworks", run(pip_install(f"{tf.package}=={tf.version}")))
