from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict

from hvd_container.core import yamlconf
from hvd_container.core.errors import UserError


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
    assert msg.startswith(
        "f.yaml:2: inner.flavor: not allowed (got 'intel') (allowed: openmpi, mpich)"
    )
    assert "(got 'intel')" in msg


def test_wrong_type_inside_a_list() -> None:
    msg = _check("name: x\nitems:\n  - flavor: mpich\n  - flavor: mpich\n    count: many\n")
    assert msg.startswith("f.yaml:5: items.1.count: expected an integer")


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


def test_duplicate_key_is_an_error_with_both_lines() -> None:
    with pytest.raises(UserError) as err:
        yamlconf.parse("name: a\ninner:\n  flavor: mpich\n  flavor: openmpi\n", "f.yaml")
    assert str(err.value) == "f.yaml:4: inner.flavor: key appears twice (first on line 3): keep one"


def test_duplicate_key_in_a_flow_mapping() -> None:
    with pytest.raises(UserError) as err:
        yamlconf.parse("items: [{flavor: a, flavor: b}]\n", "f.yaml")
    assert str(err.value).startswith("f.yaml:1: items.0.flavor: key appears twice")


def test_same_key_in_different_mappings_and_merge_keys_are_fine() -> None:
    text = "base: &b {count: 1}\ninner:\n  <<: *b\n  count: 2\nitems:\n  - {count: 1}\n  - {count: 2}\n"
    doc = yamlconf.parse(text, "f.yaml")
    assert doc.data["inner"] == {"count": 2}


def test_bad_mapping_key_names_the_key() -> None:
    from typing import Annotated

    from pydantic import AfterValidator

    def upper(key: str) -> str:
        if not key.isupper():
            raise ValueError("keys must be upper case")
        return key

    class _Env(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        env: dict[Annotated[str, AfterValidator(upper)], str]

    doc = yamlconf.parse("env:\n  OK: x\n  bad key: y\n", "f.yaml")
    with pytest.raises(UserError) as err:
        yamlconf.validate(_Env, doc)
    assert str(err.value) == "f.yaml:3: env: key 'bad key': keys must be upper case"


def test_did_you_mean_offers_only_a_near_name() -> None:
    from hvd_container.core.text import did_you_mean

    assert did_you_mean("verison", ["name", "version"]) == ", did you mean 'version'?"
    assert did_you_mean("colour", ["name", "version"]) == ""


@pytest.mark.parametrize(
    ("typed", "choices", "said"),
    [
        ("daint", ["cscs-daint", "cscs-clariden", "local"], ", did you mean 'cscs-daint'?"),
        ("juwels", ["juwels-booster", "jupiter"], ", did you mean 'juwels-booster'?"),
        ("jupiter-booster", ["juwels-booster", "jupiter"], ", did you mean 'jupiter'?"),
        ("enviroment", ["name", "env", "labels"], ", did you mean 'env'?"),
        ("perlmuter", ["perlmutter", "neuron"], ", did you mean 'perlmutter'?"),
        (
            "amd_a100_8",
            ["amd_a100nv_8", "amd_a100_4", "gh200_1"],
            ", did you mean 'amd_a100nv_8' or 'amd_a100_4'?",
        ),  # fmt: skip
        ("zzz", ["local", "neuron"], ""),
        ("cscs", ["cscs-daint", "cscs-clariden"], ""),  # two fit a word: difflib's turn, none
    ],
)
def test_did_you_mean_finds_what_a_mistyped_name_stands_for(
    typed: str, choices: list[str], said: str
) -> None:
    from hvd_container.core.text import did_you_mean

    assert did_you_mean(typed, choices) == said
