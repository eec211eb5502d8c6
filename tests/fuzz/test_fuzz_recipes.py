"""Hostile strings in every string field of a recipe: each is refused with one line, or both
rendered files keep the instructions and sections the same recipe has with a harmless value."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from hvd_container.containers.recipe_loader import load_recipe
from hvd_container.containers.render import render_definition, render_dockerfile
from hvd_container.recipes import path as recipes_path
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hvd_container.core.errors import UserError

BASE: dict[str, Any] = yaml.safe_load((recipes_path() / "cpu-bookworm.yaml").read_text())

# (where the value goes, a harmless value of that field)
FIELDS: list[tuple[tuple[str | int, ...], str]] = [
    (("name",), "x"),
    (("version",), "1"),
    (("description",), "an image"),
    (("base", "image"), "debian:bookworm"),
    (("python", "version"), "3.11"),
    (("mpi", "version"), "4.1.4"),
    (("pytorch", "version"), "2.13.0"),
    (("pytorch", "cuda_tag"), "cpu"),
    (("horovod", "version"), "0.28.1"),
    (("apt", 0), "vim"),
    (("pip", 0), "rich"),
    (("env", "HARMLESS"), "v"),
    (("env", "KEY"), "v"),  # the key itself is replaced below
    (("labels", "team"), "ml"),
    (("labels", "KEY"), "v"),
    (("checks", 0), "true"),
]

FRAGMENTS = [
    "\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\t", "\x00",
    "%setup", "%files", " %post", "\\", "<<EOF", '"', "'", "`id`", "$(id)", "${A}", "$A",
    "--index-url=http://evil", "-o", "APT::x=1", "FROM evil", "RUN id", "\nRUN id\n",
    "\n%setup\ntouch /pwned\n", "#", "=", ":", "@", " ", "x", "1.0", "torch", "==",
]  # fmt: skip

# structural fragments at both ends, where they matter most (a leading %, a trailing \\)
hostile = st.tuples(
    st.sampled_from(FRAGMENTS),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=4).map("".join),
    st.sampled_from(["", *FRAGMENTS]),
).map("".join)


def _field(path: tuple[str | int, ...]) -> int:
    return next(i for i, (p, _) in enumerate(FIELDS) if p == path)


def _with(path: tuple[str | int, ...], value: str, replace_key: bool) -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data.setdefault("env", {})
    data.setdefault("labels", {})
    data.setdefault("apt", ["vim"])
    data.setdefault("pip", ["rich"])
    data.setdefault("checks", ["true"])
    *parents, last = path
    node: Any = data
    for part in parents:
        node = node[part]
    if replace_key:
        node[value] = "v"
    elif isinstance(node, list):
        node[last] = value  # type: ignore[index]
    else:
        node[last] = value
    return data


def _dockerfile_shape(text: str) -> list[str]:
    """The instruction keywords, as Docker reads the file (continuations joined)."""
    words, joined = [], ""
    for line in text.split("\n"):
        if not joined and (not line.strip() or line.lstrip().startswith("#")):
            continue
        joined += line
        if line.endswith("\\"):
            joined = joined[:-1]
            continue
        words.append(joined.split()[0].upper())
        joined = ""
    return words


def _definition_shape(text: str) -> list[str]:
    """Header keys, then the sections, as Apptainer's scanner reads the file."""
    shape = []
    in_header = True
    for line in text.split("\n"):
        words = line.split()
        if words and words[0].startswith("%"):
            in_header = False
            shape.append(words[0])
        elif in_header and words:
            shape.append(words[0])
    return shape


def _render(data: dict[str, Any]) -> tuple[list[str], list[str]] | UserError:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.yaml"
        path.write_text(yaml.safe_dump(data, allow_unicode=False))
        started = time.monotonic()
        try:
            recipe = load_recipe(path)
            return _dockerfile_shape(render_dockerfile(recipe)), _definition_shape(
                render_definition(recipe)
            )
        except UserError as exc:
            return exc
        finally:
            assert time.monotonic() - started < 10, "loading and rendering must end in bounded time"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(range(len(FIELDS))), value=hostile)
# hijacks found by hand: each changed the structure of a rendered file before
@example(field=_field(("description",)), value="%setup")
@example(field=_field(("checks", 0)), value="  %files")
@example(field=_field(("checks", 0)), value="true \\")
@example(field=_field(("checks", 0)), value="cat <<EOF")
@example(field=_field(("pip", 0)), value="--index-url=http://evil/simple")
@example(field=_field(("apt", 0)), value="-oAPT::Update::Pre-Invoke::=id")
@example(field=_field(("base", "image")), value="debian:bookworm AS x")
@example(field=_field(("labels", "team")), value="ml\u2028%setup")
@example(field=_field(("pytorch", "version")), value=" 2.13.0")
def test_a_hostile_value_is_refused_or_stays_in_its_instruction(field: int, value: str) -> None:
    path, harmless = FIELDS[field]
    replace_key = path[-1] == "KEY"
    baseline = _render(_with(path, harmless, replace_key))
    assert not isinstance(baseline, UserError), baseline
    result = _render(_with(path, value, replace_key))
    if isinstance(result, UserError):
        assert "\n" not in str(result) and "\r" not in str(result), str(result)
        return
    assert result == baseline, (path, value)
