"""The JSON Schema of a recipe file, for editors (yaml-language-server) and check-jsonschema.

Made from the pydantic model, so it cannot drift from what `load_recipe` accepts; the shipped
copy (recipes/recipe.schema.json) is checked against it by the tests. A file with `extends:`
gives only what it changes (and `null` removes a key), so for such a file nothing is required
and every value may also be null; a file without it must be a whole recipe.
"""

from __future__ import annotations

import copy
from typing import Any

from hvd_container.containers.recipe import Recipe

SCHEMA_FILE = "recipe.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
EXTENDS = {
    "type": "string",
    "description": "A built-in recipe name or a path (relative to this file) whose keys this "
    "file extends: mappings merge, other values replace, null removes.",
}


def _partial(node: Any) -> Any:
    """node with nothing required, every property nullable and $defs/X pointing at PartialX."""
    if isinstance(node, list):
        return [_partial(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _partial(v) for k, v in node.items() if k != "required"}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        out["$ref"] = "#/$defs/Partial" + ref[len("#/$defs/") :]
    if isinstance(out.get("properties"), dict):
        out["properties"] = {
            key: {"anyOf": [value, {"type": "null"}]} for key, value in out["properties"].items()
        }
    return out


def recipe_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a recipe file."""

    whole = Recipe.model_json_schema()
    defs = whole.pop("$defs", {})
    whole.pop("title", None)
    partial = _partial(copy.deepcopy(whole))
    partial["properties"]["extends"] = EXTENDS
    partial_defs = {f"Partial{name}": _partial(copy.deepcopy(d)) for name, d in defs.items()}
    return {
        "$schema": DIALECT,
        "title": "hvd-container recipe",
        "description": "A declarative description of a PyTorch DDP/FSDP, Horovod or Lightning training image "
        "(hvd-container recipes validate FILE checks it with line numbers).",
        "type": "object",
        "if": {"required": ["extends"]},
        "then": partial,
        "else": whole,
        "$defs": {**defs, **partial_defs},
    }
