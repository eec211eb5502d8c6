"""Shell completion of values: recipe names, site names, image files (typer's autocompletion).

Subcommands, options and enum values complete by themselves; these fill in what only
hvd-container knows. Each runs in the completing shell's subprocess, so it stays quick and
never fails: a broken profile or an unreadable directory gives fewer candidates, not an error.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import typer

from hvd_container import recipes

# what --image takes as a file: a SIF or squashfs image, or a directory (an unpacked image)
IMAGE_SUFFIXES = (".sif", ".sqfs", ".squashfs")
RECIPE_SUFFIXES = (".yaml", ".yml")


def _names(names: list[str], incomplete: str) -> list[str]:
    return [n for n in names if n.startswith(incomplete)]


def _files(incomplete: str, suffixes: tuple[str, ...]) -> list[str]:
    """Directories and files with one of suffixes that start with incomplete."""
    folder, prefix = os.path.split(incomplete)
    try:
        entries = sorted(os.scandir(folder or "."), key=lambda e: e.name)
    except OSError:
        return []
    out = []
    for entry in entries:
        if not entry.name.startswith(prefix) or (entry.name[0] == "." and prefix[:1] != "."):
            continue
        path = os.path.join(folder, entry.name)
        try:
            if entry.is_dir():
                out.append(path + "/")
            elif entry.name.endswith(suffixes):
                out.append(path)
        except OSError:
            continue
    return out


def _names_then_files(lister: Callable[[], list[str]], incomplete: str) -> list[str]:
    try:
        names = lister()
    except Exception:  # completion must not fail: offer files alone
        names = []
    return _names(names, incomplete) + _files(incomplete, RECIPE_SUFFIXES)


def complete_recipe(incomplete: str) -> list[str]:
    """Built-in recipe names, then recipe files."""
    return _names_then_files(recipes.names, incomplete)


def complete_site(incomplete: str) -> list[str]:
    """Site profile names (built-in and your own); profile files where what is typed is a
    path or no name fits."""
    # only when completing: every command module that offers --site imports this one, and the
    # site model costs them about 250 ms
    from hvd_container.launcher.sites.loader import list_sites

    try:
        names = _names(list_sites(), incomplete)
    except Exception:  # completion must not fail: offer files alone
        names = []
    if names and not incomplete.startswith((".", "/", "~")) and "/" not in incomplete:
        return names
    return names + _files(incomplete, RECIPE_SUFFIXES)


def complete_partition(ctx: typer.Context, incomplete: str) -> list[str]:
    """The partitions of the site the command line names so far (or the one it would use)."""
    # the site model when completing only: about 250-450 ms to import
    from hvd_container.launcher.sites.loader import select_site

    try:
        site = select_site(ctx.params.get("site"))
        return _names(list(site.scheduler.partitions), incomplete)
    except Exception:  # a profile that does not load: nothing to offer
        return []


def complete_controller(incomplete: str) -> list[str]:
    # the launch side when completing only: about 20 ms (the registry, not the controllers)
    from hvd_container.launcher import controllers

    return _names(controllers.names(), incomplete)


def complete_runtime(incomplete: str) -> list[str]:
    # the runtimes when completing only: about 240 ms (the site model comes with them)
    from hvd_container.launcher import runtimes

    return _names(runtimes.kinds(), incomplete)


def complete_mpi(incomplete: str) -> list[str]:
    # the site model when completing only: about 250-450 ms
    from hvd_container.launcher.sites.model import MPI_PLUGINS

    return _names(list(MPI_PLUGINS), incomplete)


def complete_image(incomplete: str) -> list[str]:
    """Image files: SIFs, squashfs images and directories."""
    return _files(incomplete, IMAGE_SUFFIXES)
