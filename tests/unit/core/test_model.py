"""core/model.py: the base of every model read from a file."""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated, Any, Literal

import pytest
from hvd_container.containers import recipe  # noqa: F401  (its models)
from hvd_container.launcher import runtimes
from hvd_container.launcher.sites import model  # noqa: F401  (its models)
from pydantic import Field, TypeAdapter, ValidationError

from hvd_container.core.model import ByKind, Strict, empty_list


def _printed(code: str) -> str:
    """What `code` prints in a new interpreter (which models it built is this process's)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_site_model_builds_no_validator_when_imported() -> None:
    """Models build their validators on first use (core/model.py's defer_build): importing the
    site model for a dry run pays for the classes, not for the schema of every runtime."""
    code = (
        "from hvd_container.launcher.sites.model import Site\n"
        "from hvd_container.launcher import runtimes\n"
        "models = [Site, *runtimes.profiles()]\n"
        "print(sum(m.__pydantic_complete__ for m in models), len(models))\n"
        "Site.model_validate({'name': 'x', 'runtime': {'kind': 'none'}})\n"
        "print(Site.__pydantic_complete__)\n"
    )
    built, later = _printed(code).split("\n")[:2]
    assert built.split()[0] == "0" and int(built.split()[1]) > 2
    assert later == "True"


def _models(base: type) -> list[type]:
    found = []
    for sub in base.__subclasses__():
        found += [sub, *_models(sub)]
    return found


def test_no_model_field_defaults_through_a_builtin_factory() -> None:
    """Field(default_factory=list) costs every validator build a tokenizer pass over list's
    text signature (core/model.py's empty_list says why): the models use empty_list/_dict."""
    runtimes.profiles()  # every runtime's module, with its profile model
    models = _models(Strict)
    builtin = [
        f"{m.__module__}.{m.__name__}.{name}"
        for m in models
        for name, field in m.model_fields.items()
        if field.default_factory in (list, dict, set, tuple)
    ]
    assert len(models) > 20
    assert builtin == []


class _Cat(Strict):
    kind: Literal["cat"]
    lives: int = 9


class _Dog(Strict):
    kind: Literal["dog", "hound"]
    bark: str = "woof"


_PETS = {"cat": _Cat, "dog": _Dog, "hound": _Dog}
_Pet = Annotated[Strict, ByKind(_PETS.get, lambda: (_Cat, _Dog))]


class _Home(Strict):
    pet: _Pet
    others: list[_Pet] = Field(default_factory=empty_list)


def _errors(data: dict[str, Any]) -> list[tuple[Any, ...]]:
    with pytest.raises(ValidationError) as caught:
        _Home.model_validate(data)
    return [(e["type"], e["loc"]) for e in caught.value.errors()]


def test_by_kind_validates_with_the_model_the_kind_names_alone() -> None:
    home = _Home.model_validate({"pet": {"kind": "hound"}, "others": [{"kind": "cat", "lives": 3}]})
    assert home.pet == _Dog(kind="hound") and home.others == [_Cat(kind="cat", lives=3)]
    assert _Home.model_validate({"pet": home.pet}).pet is home.pet  # a model passes as it is
    # its errors are the named model's, at the entry's place
    assert _errors({"pet": {"kind": "cat", "lives": "9", "tail": 1}}) == [
        ("int_type", ("pet", "lives")),
        ("extra_forbidden", ("pet", "tail")),
    ]
    assert _errors({"pet": {"kind": "cat"}, "others": [{"kind": "dog", "bark": 1}]}) == [
        ("string_type", ("others", 0, "bark")),
    ]


def test_a_kind_no_model_takes_gets_the_unions_error() -> None:
    assert _errors({"pet": {"kind": "cow"}}) == [("union_tag_invalid", ("pet",))]
    assert _errors({"pet": {"lives": 1}}) == [("union_tag_not_found", ("pet",))]
    assert _errors({"pet": "cat"}) == [("model_attributes_type", ("pet",))]


def test_by_kind_builds_no_validator_of_another_kind() -> None:
    code = (
        "from typing import Annotated, Literal\n"
        "from hvd_container.core.model import ByKind, Strict\n"
        "class A(Strict):\n    kind: Literal['a']\n"
        "class B(Strict):\n    kind: Literal['b']\n"
        "class H(Strict):\n"
        "    x: Annotated[Strict, ByKind({'a': A, 'b': B}.get, lambda: (A, B))]\n"
        "H.model_validate({'x': {'kind': 'a'}})\n"
        "print(A.__pydantic_complete__, B.__pydantic_complete__)\n"
    )
    assert _printed(code).split() == ["True", "False"]


def test_by_kinds_json_schema_is_the_unions() -> None:
    union = TypeAdapter(Annotated[_Cat | _Dog, Field(discriminator="kind")]).json_schema()
    schema = _Home.model_json_schema()
    defs = union.pop("$defs")
    assert schema["properties"]["pet"] == {**union, "title": "Pet"}
    assert schema["properties"]["others"]["items"] == union
    assert schema["$defs"] == defs
