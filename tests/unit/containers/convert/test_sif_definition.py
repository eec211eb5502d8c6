"""`convert --to def` for every shipped recipe: written atomically, well-formed, shell-valid."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from hvd_container.containers.convert.definition import write_definition
from hvd_container.containers.recipe_loader import list_builtin, load_recipe
from hvd_container.containers.render import render_definition

from hvd_container.cli.app import main
from hvd_container.core.errors import UserError

SECTIONS = {
    "help", "labels", "environment", "post", "runscript", "test", "files", "setup",
    "startscript", "arguments",
}  # fmt: skip
SHELL_SECTIONS = ("environment", "post", "runscript", "test")


def parse(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """Header keys and section bodies of a Singularity definition."""
    header: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = re.match(r"^%(\w+)\s*$", line)
        if match:
            name = match.group(1)
            assert name in SECTIONS, f"unknown section %{name}"
            assert name not in sections, f"section %{name} twice"
            current = sections[name] = []
        elif current is not None:
            current.append(line)
        elif line.strip():
            key, sep, value = line.partition(":")
            assert sep, f"header line without key: {line!r}"
            header[key.strip().lower()] = value.strip()
    return header, {k: "\n".join(v) for k, v in sections.items()}


@pytest.mark.parametrize("name", list_builtin())
def test_definition_for_each_shipped_recipe(name: str, tmp_path: Path) -> None:
    recipe = load_recipe(name)
    target = tmp_path / f"{name}.def"
    assert main(["convert", name, "--to", "def", "-o", str(target)]) == 0
    text = target.read_text()
    assert text == render_definition(recipe)
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no temp file left
    header, sections = parse(text)
    if recipe.base.image.startswith("debootstrap:"):
        assert header["bootstrap"] == "debootstrap"
        assert header["osversion"] == recipe.base.image.split(":", 1)[1]
    else:
        assert header["bootstrap"] == "docker"
        assert header["from"] == recipe.base.image
    assert {"post", "environment", "labels", "runscript"} <= set(sections)
    labels = dict(
        line.strip().split(None, 1) for line in sections["labels"].splitlines() if line.strip()
    )
    assert labels["org.hvd-container.recipe.name"] == recipe.name
    assert labels["org.hvd-container.arch"] == recipe.arch
    for key in recipe.env:
        assert re.search(rf"^\s*export {re.escape(key)}=", sections["environment"], re.M), key
    for section in SHELL_SECTIONS:
        if section in sections:
            check = subprocess.run(["sh", "-n"], input=sections[section], text=True,
                                   capture_output=True)  # fmt: skip
            assert check.returncode == 0, f"%{section}: {check.stderr}"


def test_definition_needs_a_recipe() -> None:
    with pytest.raises(UserError, match="needs a recipe"):
        write_definition(None, "x.def")
