"""Golden files for every shipped recipe: the Dockerfile and the Singularity definition.

Regenerate after an intended change with `UPDATE_GOLDEN=1 python -m pytest tests/unit/containers/test_render_golden.py`
and review the diff.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hvd_container.containers.convert.from_dockerfile import instructions
from hvd_container.containers.recipe import Recipe
from hvd_container.containers.recipe_loader import list_builtin, load_recipe
from hvd_container.containers.render import render_definition, render_dockerfile

GOLDEN = Path(__file__).resolve().parent.parent.parent / "golden" / "render"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def check(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} differs: run with UPDATE_GOLDEN=1 and review"


@pytest.mark.parametrize("name", list_builtin())
def test_dockerfile(name: str) -> None:
    check(GOLDEN / f"{name}.Dockerfile", render_dockerfile(load_recipe(name)))


@pytest.mark.parametrize("name", list_builtin())
def test_definition(name: str) -> None:
    check(GOLDEN / f"{name}.def", render_definition(load_recipe(name)))


# Every built-in recipe is amd64: this arm64 variant keeps `FROM --platform=...` under review.
ARM64_VARIANT = "extends: cpu-bookworm\nname: cpu-bookworm-arm64\narch: arm64\n"


@pytest.mark.parametrize(
    ("ext", "render"), [("Dockerfile", render_dockerfile), ("def", render_definition)]
)
def test_arm64_variant(tmp_path: Path, ext: str, render: Callable[[Recipe], str]) -> None:
    path = tmp_path / "cpu-bookworm-arm64.yaml"
    path.write_text(ARM64_VARIANT)
    check(GOLDEN / f"cpu-bookworm-arm64.{ext}", render(load_recipe(path)))


def test_no_stale_golden_files() -> None:
    expected = {
        f"{n}.{ext}"
        for n in [*list_builtin(), "cpu-bookworm-arm64"]
        for ext in ("Dockerfile", "def")
    }
    assert {p.name for p in GOLDEN.iterdir()} == expected


@pytest.mark.parametrize("name", list_builtin())
def test_every_run_and_the_post_section_parse_as_sh(name: str) -> None:
    recipe = load_recipe(name)
    runs = [i[4:] for i in instructions(render_dockerfile(recipe)) if i.startswith("RUN ")]
    definition = render_definition(recipe)
    post = definition.split("\n%post\n", 1)[1].split("\n%runscript\n", 1)[0]
    for script in [*runs, post]:
        done = subprocess.run(["/bin/sh", "-n"], input=script, text=True, capture_output=True)
        assert done.returncode == 0, f"{script}\n{done.stderr}"
