"""Test helper: --json output checked against the documented record schemas
(hvd_container/cli/json_output.py, printed by `hvd-container schema output`)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from hvd_container.cli.json_output import OUTPUT_SCHEMAS


def records(stdout: str) -> list[dict[str, Any]]:
    """Every line of stdout as a JSON object (nothing else may be there)."""
    lines = stdout.splitlines()
    assert lines, "no JSON on stdout"
    out = []
    for line in lines:
        record = json.loads(line)
        assert isinstance(record, dict), line
        out.append(record)
    return out


def check(kind: str, record: dict[str, Any]) -> dict[str, Any]:
    """record, after checking it against the documented schema of kind."""
    jsonschema.validate(record, OUTPUT_SCHEMAS[kind])
    return record


def result(kind: str, stdout: str) -> dict[str, Any]:
    """The one result record of a command's --json output (progress events checked too)."""
    *events, last = records(stdout)
    for event in events:
        check("progress", event)
    assert last["event"] == "result", last
    return check(kind, last)


def error(stdout: str) -> dict[str, Any]:
    """The error record that ends a failed command's --json output."""
    last = records(stdout)[-1]
    assert last["event"] == "error", last
    return check("error", last)
