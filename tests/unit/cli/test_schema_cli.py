"""JSON Schemas for editors: made from the models, shipped next to the YAML files they describe,
named on each shipped file's first line, and agreeing with the loaders on good and bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from _recipe_helpers import CPU_RECIPE, merged

from hvd_container.cli.app import main
from hvd_container.cli.commands.schema import schema_text

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = {
    "recipe": (ROOT / "recipes", "recipe.schema.json"),
    "site": (ROOT / "launcher" / "sites", "site.schema.json"),
}


def validator(kind: str) -> jsonschema.Draft202012Validator:
    folder, name = SHIPPED[kind]
    schema = json.loads((folder / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(kind: str, data: Any) -> list[str]:
    return [e.message for e in validator(kind).iter_errors(data)]


@pytest.mark.parametrize("kind", sorted(SHIPPED))
def test_shipped_schema_is_what_the_model_gives(kind: str) -> None:
    folder, name = SHIPPED[kind]
    assert (folder / name).read_text() == schema_text(kind), (
        f"run: hvd-container schema {kind} -o {folder.relative_to(ROOT)}/{name}"
    )


@pytest.mark.parametrize("kind", sorted(SHIPPED))
def test_every_shipped_file_names_its_schema_and_validates(kind: str) -> None:
    folder, name = SHIPPED[kind]
    files = sorted(folder.glob("*.yaml"))
    assert len(files) >= 5
    for path in files:
        first = path.read_text().splitlines()[0]
        assert first == f"# yaml-language-server: $schema={name}", path.name
        assert errors(kind, yaml.safe_load(path.read_text())) == [], path.name


def test_recipe_schema_refuses_what_the_loader_refuses() -> None:
    assert errors("recipe", CPU_RECIPE) == []
    assert errors("recipe", merged(CPU_RECIPE, colour="red"))
    assert errors("recipe", merged(CPU_RECIPE, arch="sparc64"))
    assert errors("recipe", merged(CPU_RECIPE, mpi={"flavor": "lam"}))
    assert errors("recipe", {k: v for k, v in CPU_RECIPE.items() if k != "python"})


def test_recipe_schema_takes_the_shorthands_and_partial_children() -> None:
    assert errors("recipe", merged(CPU_RECIPE, base="debian:bookworm", version=1)) == []
    # a child gives only what it changes; null removes a key
    assert errors("recipe", {"extends": "cpu-bookworm", "pip": ["rich"], "mpi": None}) == []
    assert (
        errors("recipe", {"extends": "cpu-bookworm", "horovod": {"frameworks": ["pytorch"]}}) == []
    )
    assert errors("recipe", {"extends": "cpu-bookworm", "colour": "red"})
    assert errors("recipe", {"extends": "cpu-bookworm", "mpi": {"flavor": "lam"}})


def test_site_schema_refuses_what_the_loader_refuses() -> None:
    good = {"name": "mine", "runtime": {"kind": "apptainer"}}
    assert errors("site", good) == []
    assert errors("site", {"name": "mine"})  # runtime is required
    assert errors("site", {**good, "runtime": {"kind": "docker"}})
    assert errors("site", {**good, "scheduler": {"colour": "red"}})
    assert errors("site", {**good, "scheduler": {"gpus_per_node": "4"}})


def test_schema_command_prints_and_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schema", "site"]) == 0
    assert capsys.readouterr().out == schema_text("site")
    target = tmp_path / "recipe.schema.json"
    assert main(["schema", "recipe", "-o", str(target)]) == 0
    assert target.read_text() == schema_text("recipe")
    assert main(["schema", "lock"]) == 2


def test_schema_to_a_file_it_cannot_write_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both were tracebacks (FileNotFoundError, and OSError renaming onto /)."""
    assert main(["schema", "site", "-o", f"{tmp_path}/missing/s.json"]) == 2
    assert capsys.readouterr().err == (
        f"hvd-container: error: --output {tmp_path}/missing/s.json: directory "
        f"{tmp_path}/missing does not exist\n"
    )
    assert main(["schema", "site", "-o", "/"]) == 2
    assert (
        capsys.readouterr().err
        == "hvd-container: error: --output /: is a directory, expected a file path\n"
    )
