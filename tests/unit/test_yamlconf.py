from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict

from hvd_container import yamlconf
from hvd_container.errors import UserError


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    flavor: Literal["openmpi", "mpich"]
    count: int = 1


class _Outer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    inner: _Inner | None = None
    items: list[_Inner] = []


def _check(text: str) -> str:
    doc = yamlconf.parse(text, "f.yaml")
    with pytest.raises(UserError) as err:
        yamlconf.validate(_Outer, doc)
    return str(err.value)


def test_unknown_key_names_line_path_and_allowed_keys() -> None:
    msg = _check("name: x\ninner:\n  flavor: mpich\n  colour: red\n")
    assert msg == "f.yaml:4: inner.colour: unknown key (allowed: flavor, count)"


def test_bad_enum_lists_allowed_values() -> None:
    msg = _check("name: x\ninner: {flavor: intel}\n")
    assert msg.startswith("f.yaml:2: inner.flavor: Input should be 'openmpi' or 'mpich'")
    assert "(got 'intel')" in msg


def test_wrong_type_inside_a_list() -> None:
    msg = _check("name: x\nitems:\n  - flavor: mpich\n  - flavor: mpich\n    count: many\n")
    assert msg.startswith("f.yaml:5: items.1.count: Input should be a valid integer")


def test_missing_key_points_at_parent() -> None:
    assert (
        _check("name: x\ninner:\n  count: 2\n") == "f.yaml:2: inner.flavor: required key is missing"
    )


def test_syntax_error_is_one_line_with_line() -> None:
    with pytest.raises(UserError) as err:
        yamlconf.parse("name: [x\nother: 1\n", "f.yaml")
    assert str(err.value).startswith("f.yaml:")
    assert "not valid YAML" in str(err.value)
    assert "\n" not in str(err.value)


def test_top_level_must_be_mapping() -> None:
    with pytest.raises(UserError, match=r"f.yaml:1: the top level must be a mapping"):
        yamlconf.parse("- a\n- b\n", "f.yaml")


def test_missing_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UserError, match="no such file"):
        yamlconf.load(tmp_path / "absent.yaml")
