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

from hvd_container.core.errors import UserError
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
    def __init__(self, path: Path_, problem: str) -> None:
        super().__init__(problem)
        self.path = path
        self.problem = problem


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
        return [_convert(inner, item, (*path, i)) for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _Invalid(path, f"expected a mapping{_shown(value)}")
        _, inner = typing.get_args(annotation)
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Invalid((*path, str(key)), f"keys must be strings (got {key!r})")
            if has_line_ends(key):
                raise _Invalid(
                    (*path, key), "control characters and line breaks are not allowed in keys"
                )
            out[key] = _convert(inner, item, (*path, key))
        return out
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


def _build(cls: type[T], data: Any, path: Path_) -> T:
    keys = yaml_keys(cls)
    if not isinstance(data, dict):
        raise _Invalid(path, f"expected a mapping (keys: {', '.join(keys)}){_shown(data)}")
    for key in data:
        if key not in keys:
            raise _Invalid((*path, str(key)), f"unknown key (allowed: {', '.join(keys)})")
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in data:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if required and not f.metadata.get("internal"):
                raise _Invalid((*path, f.name), "required key is missing")
            continue
        value = _convert(hints[f.name], data[f.name], (*path, f.name))
        check = f.metadata.get("check")
        if check is not None:
            problem = check(value)
            if problem:
                raise _Invalid((*path, f.name), f"{problem}{_shown(value)}")
        values[f.name] = value
    try:
        return cls(**values)
    except ValueError as exc:  # __post_init__ cross-field checks
        raise _Invalid(path, str(exc)) from None


def validate(cls: type[T], data: Any, where: Callable[[Path_], str]) -> T:
    """Build cls from data; errors as one-line UserError starting with where(key path).

    `where` is usually `yamlconf.Document.where`, which gives FILE:LINE.
    """
    try:
        return _build(cls, data, ())
    except _Invalid as exc:
        dotted = ".".join(str(p) for p in exc.path) or "(top level)"
        where_path = exc.path[:-1] if exc.problem == "required key is missing" else exc.path
        raise UserError(f"{where(where_path)}: {dotted}: {exc.problem}") from None
