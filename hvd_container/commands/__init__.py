"""Command groups of the CLI. Each module has `register(app)`; keep module-level imports light."""

from hvd_container.commands import build as _build
from hvd_container.commands import convert as _convert
from hvd_container.commands import jobs as _jobs
from hvd_container.commands import jupyter as _jupyter
from hvd_container.commands import recipes as _recipes
from hvd_container.commands import render as _render
from hvd_container.commands import run as _run
from hvd_container.commands import sites as _sites

COMMAND_MODULES = [_build, _convert, _recipes, _render, _sites, _run, _jobs, _jupyter]
