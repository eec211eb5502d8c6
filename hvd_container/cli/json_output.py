"""`--json`: what every command prints for machines, and the schema of each record.

The rules, the same for every command: standard output carries JSON lines only, one object a
line. A command ends with one `{"event": "result", ...}` object (lists inside it, as
`squeue --json` does), or, when it fails, with one `{"event": "error", ...}` record and a
non-zero exit; the one-line error and warnings still go to standard error. Long steps (build,
push, convert) print progress events before that (`{"event": "step"|"log"|..., "phase": ...}`).

OUTPUT_SCHEMAS is the documentation of the field names (`hvd-container schema output` prints
it) and what the tests validate every command's output against: a field that is added or
renamed without changing it here fails them.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from hvd_container.core.errors import UserError, exit_code_of, interrupt_text, problem_record


def emit(record: dict[str, Any]) -> None:
    """Print one result record (ASCII only: labels and names from others cannot reach a
    terminal or break a reader's encoding)."""
    write_line(json.dumps({"event": "result", **record}, ensure_ascii=True))


def write_line(line: str) -> None:
    """One line on stdout; a reader that went away (`| head -1`) ends the output quietly."""

    try:
        print(line, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def error_record(
    exc: BaseException, phase: str | None, elapsed: float | None = None
) -> dict[str, Any]:
    """The JSON error record of a failure: the CLI's one-line message(s) and exit status;
    `elapsed` where the command streams progress (it has a clock to count from)."""
    text = interrupt_text(exc) if isinstance(exc, KeyboardInterrupt) else str(exc)
    problems = exc.problems if isinstance(exc, UserError) else [text]
    record: dict[str, Any] = {
        "event": "error",
        "phase": phase,
        "text": text.split("\n", 1)[0],
        "problems": problems,
        "details": [problem_record(p) for p in problems],
        "exit_code": exit_code_of(exc),
        "step": getattr(exc, "step", None),
        "instruction": getattr(exc, "instruction", None),
        "tail": getattr(exc, "tail", []),
    }
    if elapsed is not None:
        record["elapsed"] = round(elapsed, 3)
    return record


def print_error(exc: BaseException, phase: str | None = None) -> None:
    write_line(json.dumps(error_record(exc, phase), ensure_ascii=True))


@contextlib.contextmanager
def json_errors(enabled: bool, phase: str | None = None) -> Iterator[None]:
    """With --json, a failure inside also prints its error record on stdout (then goes on to
    the CLI's one-line message on stderr and the exit code)."""
    try:
        yield
    except (UserError, KeyboardInterrupt) as exc:
        if enabled:
            print_error(exc, phase)
        raise


def wants_json(argv: list[str] | None) -> bool:
    """--json among the options (before a `--`), for errors raised before a command runs."""
    args = sys.argv[1:] if argv is None else argv
    return "--json" in args[: args.index("--")] if "--" in args else "--json" in args


# --- the documented records ------------------------------------------------------------------

_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_NULL_STR = {"type": ["string", "null"]}
_STRS = {"type": "array", "items": _STR}
_STR_MAP = {"type": "object", "additionalProperties": _STR}


def _record(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    properties = {**required, **(optional or {})}
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _result(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return _record({"event": {"const": "result"}, **required}, optional)


_NUM_OR_NULL = {"type": ["number", "null"]}
_SCREEN = _record(
    {
        "nodes": _STRS,
        "good": _STRS,
        "exclude": _STRS,
        "verdicts": {
            "type": "array",
            "items": _record(
                {"node": _STR, "status": {"enum": ["ok", "slow", "broken", "down"]}, "why": _STR}
            ),
        },
        "pairs": {
            "type": "array",
            "items": _record({"nodes": _STRS, "busbw": _NUM_OR_NULL, "why": _STR}),
        },
        "reference_busbw_mbs": _NUM_OR_NULL,
        "expected_busbw_mbs": _NUM_OR_NULL,
        "threshold_busbw_mbs": _NUM_OR_NULL,
        "notes": _STRS,
    }
)
_RECIPE_ROW = _record(
    {
        "name": _STR,
        "image": _STR,
        "description": _STR,
        "arch": _STR,
        "gpu": _BOOL,
        "frameworks": _STRS,
        "file": _STR,
    }
)
_SITE_ROW = _record(
    {
        "name": _STR,
        "runtime": _STR,
        "arch": _STR,
        "description": _STR,
        "builtin": _BOOL,
        "file": _STR,
        "selected": _BOOL,
    }
)
_JOB_ROW = _record(
    {
        "job_id": _STR,
        "name": _STR,
        "state": _STR,
        "user": _STR,
        "elapsed": _STR,
        "nodes": _STR,
        "reason": _STR,
        # NODE_FAIL: the job's nodes Slurm counts down now
        "down_nodes": {"type": "array", "items": _STR},
    }
)

# the controller a launch uses, and why: asked for, declared, the script's own, the default
_CONTROLLER = _record({"name": _STR, "why": _STR})

_CHECK_RESULTS = {
    "type": "array",
    "items": _record(
        {
            "check": _STR,
            # skip: it could not judge; n/a: its rule does not apply to this launch or site
            "status": {"enum": ["pass", "warn", "fail", "skip", "n/a"]},
            "message": _STR,
        }
    ),
}

_DETAILS = {
    "type": "array",
    "items": _record(
        {
            "file": _NULL_STR,
            "line": {"type": ["integer", "null"]},
            "key": _NULL_STR,  # the dotted key path (python.version), where the problem has one
            "message": _STR,
            "text": _STR,  # the line as printed
        }
    ),
}
_VALIDATE_ROW = _record(
    {"recipe": _STR, "ok": _BOOL, "image": _NULL_STR, "problems": _STRS, "details": _DETAILS},
    {"notes": _STRS},
)

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "error": _record(
        {
            "event": {"const": "error"},
            "phase": _NULL_STR,
            "text": _STR,
            "problems": _STRS,
            "details": _DETAILS,  # each problem's file, line, key and message
            "exit_code": _INT,
            "step": {"type": ["integer", "null"]},  # the failing build step
            "instruction": _NULL_STR,
            "tail": _STRS,
        },
        # elapsed: where the command streams progress; recipes: a failed `recipes validate`'s
        # rows, each recipe with its problems
        {"elapsed": {"type": "number"}, "recipes": {"type": "array", "items": _VALIDATE_ROW}},
    ),
    "recipes-list": _result({"recipes": {"type": "array", "items": _RECIPE_ROW}}),
    "recipes-show": _result(
        {"name": _STR, "image": _STR, "digest": _STR, "file": _STR, "recipe": {"type": "object"}},
        # what extends: does unexpectedly (a list replaced, a description inherited); a recipe
        # that needs a lock and has none yet: the command to make it
        {"notes": _STRS},
    ),
    "recipes-validate": _result(
        {"ok": {"const": True}, "recipes": {"type": "array", "items": _VALIDATE_ROW}}
    ),
    "sites-list": _result(
        {
            "selected": _STR,
            "selected_by": _STR,
            "sites": {"type": "array", "items": _SITE_ROW},
            "warnings": _STRS,
        }
    ),
    "sites-show": _result(
        {
            "name": _STR,
            "file": _STR,
            "selected_by": _STR,
            "profile": {"type": "object"},
            "unconfirmed": _STRS,  # facts the profile's sources could not confirm
        },
        {  # --sources: each source, and how to confirm each key an unconfirmed one backs
            "sources": {
                "type": "array",
                "items": _record(
                    {
                        "about": _STR,
                        "where": _STR,
                        "checked": _STR,
                        "confirmed": _BOOL,
                        "keys": _STRS,
                        "confirm": _STR_MAP,
                    }
                ),
            }
        },
    ),
    "jobs": _result({"user": _STR, "jobs": {"type": "array", "items": _JOB_ROW}}),
    "jobs-show": _result(
        {
            "job": _STR,
            "steps": {"type": "array", "items": {"type": "object"}},
            "lost_seconds": {"type": "number"},
        }
    ),
    "cache-list": _result(
        {
            "dir": _STR,
            "bytes": {"type": "integer"},
            "images": {
                "type": "array",
                "items": _record(
                    {
                        "key": _STR,
                        "path": _STR,
                        "bytes": {"type": "integer"},
                        "modified": {"type": "number"},
                        "partial": _BOOL,
                        "source": {"type": ["string", "null"]},
                        "stale": _BOOL,
                    }
                ),
            },
        }
    ),
    "cache-prune": _result({"removed": _STRS, "kept": _STRS, "not_ours": _INT}),
    "doctor": _result(
        {
            "site": _STR,
            "image": _NULL_STR,
            "ok": _BOOL,
            # every check of the registry, in its order; skip: it lacked what it needs to judge
            "checks": _CHECK_RESULTS,
            # what the smoke job found (--smoke), per controller and operation; the screen's
            # lines too (--screen)
            "smoke": _CHECK_RESULTS,
            # --screen: each node's verdict, each pair's bus bandwidth (MB/s), what to exclude
            "screen": {"oneOf": [{"type": "null"}, _SCREEN]},
        }
    ),
    "run-dry-run": _result(
        {
            "site": _STR,
            "runtime": _STR,
            "image": _NULL_STR,
            "how": _STR,  # step (srun here), sbatch (script on stdin) or salloc
            "argv": _STRS,  # what `run` executes
            "env": _STR_MAP,
            "command": _STR,
            "script": _NULL_STR,  # what sbatch reads, when it is sbatch
            "inside_allocation": _BOOL,
            "allocation": _STRS,
            "step": _STRS,
            # files the step reads, written before it (the Container Engine's EDF): path -> text
            "files": {"type": "object", "additionalProperties": {"type": "string"}},
            "controller": _CONTROLLER,
            # the layout the launch asks for: nodes and tasks per node null where Slurm
            # chooses (or the allocation has them); tasks: srun's (torchrun: one a node); ranks:
            # the processes the training sees
            "nodes": {"type": ["integer", "null"]},
            "tasks": _INT,
            "tasks_per_node": {"type": ["integer", "null"]},
            "ranks": _INT,
            "gpus_per_node": _INT,
            "warnings": _STRS,
        }
    ),
    "jupyter-dry-run": _result({"site": _STR, "script": _STR, "warnings": _STRS}),
    "batch": _result(
        {
            "site": _STR,
            "path": _NULL_STR,
            "script": _STR,
            "argv": _STRS,  # how to submit it (the script on stdin when there is no path)
            "controller": _CONTROLLER,
            "warnings": _STRS,
        }
    ),
    "convert": _result(
        {"to": _STR, "source": _STR},  # output_schema() lists convert's targets
        {
            "path": _STR,
            "image": _STR,
            "reference": _STR,
            "size": _INT,
            "arch": _STR,
            "compression": _STR,
            "rootfs_offset": _INT,
            "seconds": {"type": "number"},
            "kept": {"type": "boolean"},  # the SIF there was already this conversion
            "engine": _STR,
            "note": _STR,
            "images": {"type": "array"},  # a SIF an architecture: these fields each
        },
    ),
    "inspect": {
        "anyOf": [
            _result(  # a SIF's facts
                {
                    "path": _STR,
                    "uuid": _STR,
                    "arch": _STR,
                    "created": _INT,
                    "modified": _INT,
                    "rootfs": {"type": "object"},
                    "descriptors": {"type": "array"},
                    "labels": _STR_MAP,
                    "build_facts": _STR_MAP,
                }
            ),
            _result({"source": _STR, "bom": {"type": "object"}}),  # --sbom: the document
            _result({"from": _STR, "to": _STR, "changes": {"type": "array"}}),  # --diff
            _result(  # --signatures
                {
                    "path": _STR,
                    "checked": _BOOL,
                    "groups": {
                        "type": "array",
                        "items": _record(
                            {
                                "group": _INT,
                                "fingerprints": _STRS,
                                "verified": {"type": ["boolean", "null"]},
                                "problems": _STRS,
                            }
                        ),
                    },
                }
            ),
            _result(  # --signatures of a pushed image
                {"image": _STR, "checked": _BOOL, "signatures": _INT, "signers": _STRS}
            ),
        ]
    },
    "sign": {
        "anyOf": [
            _result({"path": _STR, "signatures": {"type": "array"}}),  # a SIF
            _result(  # a pushed image
                {"path": _STR, "image": _record({"image": _STR, "tag": _STR, "key": _STR})}
            ),
        ]
    },
    "verify": _result(
        {"image": _STR, "ok": _BOOL, "against": _STR, "problems": _STRS, "facts": _STR_MAP},
        {"warnings": _STRS},  # known-bad library versions (hvd_container/known_bad.py)
    ),
    "build": _result(
        {
            "tag": _STR,
            "image_id": _STR,
            "cached": _BOOL,
            "seconds": {"type": "number"},
            "labels": _STR_MAP,
        },
        {
            "pushed": {"type": "object"},
            "arch": _STR,  # one record an image, where the recipe makes several
            "index": {"type": "object"},  # the image index over them (the last record)
        },
    ),
    "push": _result(
        {"remote": _STR, "digest": _STR},
        {
            "images": {"type": "array"},  # under an image index: each image pushed
            "signature": _STR,  # --sign: the tag of its signatures
        },
    ),
    "jupyter": _result(
        {"job_id": _STR},
        {
            "cancelled": _BOOL,
            "node": _STR,
            "port": _INT,
            "ssh": _STR,
            "url": _STR,
            "cluster_url": _STR,
        },
    ),
    "lock": _result(
        {
            "recipe": _STR,
            "path": _STR,
            "written": _BOOL,
            "up_to_date": _BOOL,
            "changes": _STRS,
            "packages": _STR_MAP,
            "seconds": {"type": "number"},
        },
        {
            "arch": _STR,  # one record an image where the recipe makes several
            # the base image's pin; absent for debootstrap bases and digests in the recipe
            "base": _record(
                {
                    "image": _STR,
                    "digest": {"type": ["string", "null"]},
                    "reason": _STR,
                }
            ),
        },
    ),
    "progress": _record(
        {
            "event": {"enum": ["step", "log", "info", "cached", "done", "progress"]},
            "phase": _STR,
            "text": _STR,
            "elapsed": {"type": "number"},
        },
        {
            "done": _INT,
            "total": {"type": ["integer", "null"]},
            "rate": {"type": "number"},
            "eta": {"type": ["number", "null"]},
            "layer": _STR,
            "written": _INT,
        },
    ),
}


def output_schema() -> dict[str, Any]:
    """Every record above as one JSON Schema document (`hvd-container schema output`), with
    the values of convert's `to` (a site runtime's come from its module)."""
    # convert's modules only here: every command's --json would import them (about 300 ms)
    from hvd_container.containers.convert.targets import TARGETS

    schemas = copy.deepcopy(OUTPUT_SCHEMAS)
    schemas["convert"]["properties"]["to"] = {"enum": list(TARGETS)}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "hvd-container --json records",
        "description": __doc__.strip() if __doc__ else "",
        "anyOf": [{"$ref": f"#/$defs/{name}"} for name in schemas],
        "$defs": schemas,
    }
