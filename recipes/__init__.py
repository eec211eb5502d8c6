"""Built-in recipes, shipped as package data. `path()` is the folder holding the *.yaml files."""

from importlib.resources import files
from pathlib import Path


def path() -> Path:
    return Path(str(files(__name__)))
