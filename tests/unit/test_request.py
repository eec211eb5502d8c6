"""launcher/request.py: the launch parameters, the typed object the CLI hands the library,
and the request made from it."""

from __future__ import annotations

import dataclasses

import pytest
from hvd_container.launcher.request import OPTIONS, LaunchOptions, request_from_options


def test_the_options_object_has_one_field_per_launch_parameter_in_order() -> None:
    assert [f.name for f in dataclasses.fields(LaunchOptions)] == list(OPTIONS)


def test_a_misspelt_parameter_is_refused_where_it_is_made() -> None:
    with pytest.raises(TypeError, match="ntask"):
        LaunchOptions(ntask=8)  # type: ignore[call-arg]


def test_the_request_reads_the_options_and_leaves_them_as_given() -> None:
    given = LaunchOptions(site="local", ntasks="4", env=["A=1"], binds=("/data",))
    _site, request = request_from_options("t.py", ["--epochs", "3"], given)
    assert (request.ntasks, request.env, request.binds) == (4, {"A": "1"}, ["/data"])
    assert request.args == ["--epochs", "3"]
    assert given == LaunchOptions(site="local", ntasks="4", env=["A=1"], binds=("/data",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        given.ntasks = 8  # type: ignore[misc]
