"""Python: the distribution's python3.X in a venv at /opt/venv (PEP 668), or the image's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.containers.blocks._text import VENV, apt_install, block, env, run

if TYPE_CHECKING:
    from hvd_container.containers.instructions import Block
    from hvd_container.containers.recipe import LockedRecipe


def version_check(python: str, version: str) -> str:
    major, minor = version.split(".")
    return (
        f"{python} -c 'import sys; assert sys.version_info[:2] == ({major}, {minor}), sys.version'"
    )


def render(recipe: LockedRecipe) -> Block | None:
    version = recipe.python.version
    if recipe.python.source == "image":
        return block("base", run(version_check("python3", version)))
    python = f"python{version}"
    return block(
        "base",
        apt_install(["ca-certificates", python, f"{python}-dev", f"{python}-venv"]),
        run(f"{python} -m venv {VENV}", version_check(f"{VENV}/bin/python", version)),
        env("VIRTUAL_ENV", VENV, quote=False),
        env("PATH", f"{VENV}/bin:$PATH", quote=False),
    )
