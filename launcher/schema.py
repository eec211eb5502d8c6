"""A small strict validator from YAML data to frozen dataclasses.

Site profiles are read on every `run --dry-run`; importing pydantic and building its models
costs about 75 ms there, half of the launch budget, so sites use this instead. Errors read
like the shared YAML ones: ``FILE:LINE: key.path: problem (allowed: ...)``.

Supported annotations: str, int, bool, Literal[...], X | None, list[X], dict[str, X] and
nested dataclasses. Values are never coerced between types (``"4"`` is not an int).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from hvd_container.core.errors import raise_problems, sort_by_line
from hvd_container.core.text import LINE_ENDS_ALLOWED, has_line_ends

Path_ = tuple[str | int, ...]

T = TypeVar("T")

_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def yaml_keys(cls: type) -> list[str]:
    """The keys a dataclass accepts in YAML (fields whose metadata does not hide them)."""
    return [f.name for f in dataclasses.fields(cls) if not f.metadata.get("internal")]


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is list:
        return "a list"
    if origin is dict:
        return "a mapping"
    if annotation is type(None):
        return "null"
    if dataclasses.is_dataclass(annotation):
        return "a mapping"
    return {str: "a string", int: "an integer", bool: "true or false"}.get(
        annotation, str(annotation)
    )


class _Invalid(Exception):
    """One problem, or (from a mapping or list) every problem found in it."""

    def __init__(self, path: Path_, problem: str) -> None:
        super().__init__(problem)
        self.items: list[tuple[Path_, str]] = [(path, problem)]

    @classmethod
    def gathered(cls, items: list[tuple[Path_, str]]) -> _Invalid:
        exc = cls(*items[0])
        exc.items = items
        return exc


def _each(items: list[tuple[Any, Callable[[], Any]]]) -> dict[Any, Any]:
    """Run every conversion; raise all their problems together, or return key -> value."""
    out: dict[Any, Any] = {}
    problems: list[tuple[Path_, str]] = []
    for key, convert in items:
        try:
            out[key] = convert()
        except _Invalid as exc:
            problems += exc.items
    if problems:
        raise _Invalid.gathered(problems)
    return out


def _shown(value: Any) -> str:
    return "" if isinstance(value, (dict, list)) or value is None else f" (got {value!r})"


def _convert(annotation: Any, value: Any, path: Path_) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        if value is None and type(None) in args:
            return None
        others = [a for a in args if a is not type(None)]
        if others and all(typing.get_origin(a) is Literal for a in others):
            merged = tuple(v for a in others for v in typing.get_args(a))
            return _convert(Literal[merged], value, path)  # type: ignore[valid-type]
        if len(others) == 1:
            return _convert(others[0], value, path)
        for candidate in others:
            try:
                return _convert(candidate, value, path)
            except _Invalid:
                continue
        raise _Invalid(path, f"expected {_type_name(annotation)}{_shown(value)}")
    if origin is Literal:
        allowed = typing.get_args(annotation)
        if value not in allowed or isinstance(value, bool) != isinstance(allowed[0], bool):
            names = ", ".join(str(a) for a in allowed)
            raise _Invalid(path, f"not allowed{_shown(value)} (allowed: {names})")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise _Invalid(path, f"expected a list{_shown(value)}")
        (inner,) = typing.get_args(annotation)
        converted = _each(
            [(i, _bind(_convert, inner, item, (*path, i))) for i, item in enumerate(value)]
        )
        return [converted[i] for i in range(len(value))]
    if origin is dict:
        if not isinstance(value, dict):
            raise _Invalid(path, f"expected a mapping{_shown(value)}")
        _, inner = typing.get_args(annotation)
        return _each([(key, _bind(_entry, inner, key, item, path)) for key, item in value.items()])
    if dataclasses.is_dataclass(annotation):
        return _build(annotation, value, path)  # type: ignore[arg-type]
    if annotation is bool:
        if not isinstance(value, bool):
            raise _Invalid(path, f"expected true or false{_shown(value)}")
        return value
    if annotation is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Invalid(path, f"expected an integer{_shown(value)}")
        return value
    if annotation is str:
        if not isinstance(value, str):
            raise _Invalid(path, f"expected a string{_shown(value)}")
        if has_line_ends(value):
            # every string of a profile ends up in one line: of srun's argv, of a batch script
            raise _Invalid(path, LINE_ENDS_ALLOWED)
        return value
    raise TypeError(
        f"unsupported annotation {annotation!r}"
    )  # pragma: no cover - programming error


def _bind(function: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return lambda: function(*args)


def _entry(inner: Any, key: Any, item: Any, path: Path_) -> Any:
    if not isinstance(key, str):
        raise _Invalid((*path, str(key)), f"keys must be strings (got {key!r})")
    if has_line_ends(key):
        raise _Invalid((*path, key), "control characters and line breaks are not allowed in keys")
    return _convert(inner, item, (*path, key))


def _field(f: dataclasses.Field[Any], hint: Any, value: Any, path: Path_) -> Any:
    value = _convert(hint, value, path)
    check = f.metadata.get("check")
    problem = check(value) if check is not None else None
    if problem:
        raise _Invalid(path, f"{problem}{_shown(value)}")
    return value


def _build(cls: type[T], data: Any, path: Path_) -> T:
    keys = yaml_keys(cls)
    if not isinstance(data, dict):
        raise _Invalid(path, f"expected a mapping (keys: {', '.join(keys)}){_shown(data)}")
    problems = [
        ((*path, str(key)), f"unknown key (allowed: {', '.join(keys)})")
        for key in data
        if key not in keys
    ]
    hints = _hints(cls)
    conversions = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            conversions.append(
                (f.name, _bind(_field, f, hints[f.name], data[f.name], (*path, f.name)))
            )
        elif (
            f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
            and not f.metadata.get("internal")
        ):
            problems.append(((*path, f.name), "required key is missing"))
    try:
        values = _each(conversions)
    except _Invalid as exc:
        problems += exc.items
    if problems:
        raise _Invalid.gathered(problems)
    try:
        return cls(**values)
    except ValueError as exc:  # __post_init__ cross-field checks
        raise _Invalid(path, str(exc)) from None


def validate(cls: type[T], data: Any, where: Callable[[Path_], str]) -> T:
    """Build cls from data; every error a line starting with where(key path), all raised at once
    (core.errors.Problems), sorted by line.

    `where` is usually `yamlconf.Document.where`, which gives FILE:LINE.
    """
    try:
        return _build(cls, data, ())
    except _Invalid as exc:
        lines = []
        for path, problem in exc.items:
            dotted = ".".join(str(p) for p in path) or "(top level)"
            where_path = path[:-1] if problem == "required key is missing" else path
            lines.append(f"{where(where_path)}: {dotted}: {problem}")
        raise_problems(sort_by_line(lines))
        raise


def json_schema(cls: type, title: str, description: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the YAML that `validate(cls, ...)` accepts, for editors:
    the same keys, types and allowed values (the finer checks stay in `validate`)."""
    defs: dict[str, Any] = {}
    root = _schema_of(cls, defs)
    name = root["$ref"].rsplit("/", 1)[1]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **defs.pop(name),
        "title": title,
        "description": description,
        "$defs": defs,
    }


def _schema_of(annotation: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema_of(a, defs) for a in typing.get_args(annotation)]}
    if origin is Literal:
        return {"enum": list(typing.get_args(annotation))}
    if origin is list:
        return {"type": "array", "items": _schema_of(typing.get_args(annotation)[0], defs)}
    if origin is dict:
        return {
            "type": "object",
            "additionalProperties": _schema_of(typing.get_args(annotation)[1], defs),
        }
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        name = annotation.__name__
        if name not in defs:
            defs[name] = {}  # a placeholder while its fields are made
            hints = _hints(annotation)  # type: ignore[arg-type]
            fields = [f for f in dataclasses.fields(annotation) if not f.metadata.get("internal")]
            defs[name] = {
                "type": "object",
                "description": (annotation.__doc__ or "").strip(),
                "properties": {f.name: _schema_of(hints[f.name], defs) for f in fields},
                "required": [
                    f.name
                    for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                ],
                "additionalProperties": False,
            }
        return {"$ref": f"#/$defs/{name}"}
    if annotation is type(None):
        return {"type": "null"}
    kinds = {str: "string", int: "integer", bool: "boolean"}
    if annotation in kinds:
        return {"type": kinds[annotation]}
    raise TypeError(f"unsupported annotation {annotation!r}")  # pragma: no cover
