"""YAML config files validated against pydantic models, with errors that name file, line and key.

Shared by recipes (containers/) and site profiles (launcher/). Every error is one line:
``FILE:LINE: key.path: what is wrong (allowed: ...)``.

Recipes and profiles come from other people too, so a file is read within limits, each a
one-line error: a regular file only (a FIFO or device is never opened for reading), at most
MAX_BYTES, nested at most MAX_DEPTH deep (PyYAML's composers recurse: a deep file can crash
the interpreter, not only raise), and at most MAX_NODES nodes once aliases are followed (a
"billion laughs" file, or an alias to its own ancestor, never finishes otherwise).
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from hvd_container.core.errors import UserError, raise_problems, sort_by_line
from hvd_container.core.files import read_limited_text
from hvd_container.core.model import ByKind
from hvd_container.core.text import did_you_mean

try:  # the C loader is several times faster; the launch path reads YAML on every call
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

Path_ = tuple[str | int, ...]
M = TypeVar("M")

MAX_BYTES = 1 << 20  # a recipe or profile is a few KB
MAX_DEPTH = 64
MAX_NODES = 100_000


class Document:
    """A parsed YAML mapping plus the line of every key path in it."""

    def __init__(self, data: dict[str, Any], lines: dict[Path_, int], source: str) -> None:
        self.data = data
        self.lines = lines
        self.source = source

    def line_of(self, path: Path_) -> int | None:
        """The line of the longest prefix of path that the file spells out."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None

    def where(self, path: Path_) -> str:
        line = self.line_of(path)
        return f"{self.source}:{line}" if line else self.source


class _Budget:
    """How many more nodes _index_lines may visit (aliases count each time they are reached)."""

    def __init__(self, source: str) -> None:
        self.left = MAX_NODES
        self.source = source

    def visit(self, node: yaml.Node, depth: int) -> None:
        self.left -= 1
        if self.left < 0 or depth > MAX_DEPTH:
            what = (
                f"nested more than {MAX_DEPTH} levels deep"
                if depth > MAX_DEPTH
                else f"more than {MAX_NODES} values once its aliases are expanded"
            )
            raise UserError(
                f"{self.source}:{node.start_mark.line + 1}: {what} (an alias to its own "
                "ancestor never ends): not a recipe or site profile"
            )


def _index_lines(
    node: yaml.Node, path: Path_, out: dict[Path_, int], source: str, budget: _Budget
) -> None:
    budget.visit(node, len(path))
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        first: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            line = key.start_mark.line + 1
            sub = (*path, str(key.value))
            if isinstance(key, yaml.ScalarNode) and key.value != "<<":  # `<<` merges are fine
                identity = (key.tag, key.value)
                if identity in first:
                    dotted = ".".join(str(p) for p in sub)
                    raise UserError(
                        f"{source}:{line}: {dotted}: key appears twice (first on line "
                        f"{first[identity]}): keep one"
                    )
                first[identity] = line
            out[sub] = line
            _index_lines(value, sub, out, source, budget)
    elif isinstance(node, yaml.SequenceNode):
        for i, value in enumerate(node.value):
            _index_lines(value, (*path, i), out, source, budget)


def _too_deep(source: str, line: int) -> UserError:
    return UserError(
        f"{source}:{line}: nested more than {MAX_DEPTH} levels deep: not a recipe or site profile"
    )


# libyaml 0.2.6 (PyYAML 6.0.4's wheels) refuses deep flow nesting while it scans ahead, before
# the parser's events reach MAX_DEPTH: the same refusal, said in the same words
LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


def _check_shape(text: str, source: str) -> None:
    """Refuse deep nesting before PyYAML's (recursive) composer sees it; the event parser is
    not recursive."""
    depth = 0
    for count, event in enumerate(yaml.parse(text, Loader=_Loader)):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 1
                raise _too_deep(source, line)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        if count > MAX_NODES:
            raise UserError(f"{source}: more than {MAX_NODES} values: not a recipe or site profile")


def parse(text: str, source: str) -> Document:
    """Parse YAML text into a Document; syntax errors become one-line UserErrors."""
    try:
        _check_shape(text, source)
        node = yaml.compose(text, Loader=_Loader)
        lines: dict[Path_, int] = {}
        if node is not None:  # before loading: a graph too large to walk is refused here
            _index_lines(node, (), lines, source, _Budget(source))
        data = yaml.load(text, Loader=_Loader) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        if exc.problem == LIBYAML_TOO_DEEP:
            raise _too_deep(source, mark.line + 1 if mark is not None else 1) from None
        line = f":{mark.line + 1}" if mark is not None else ""
        raise UserError(f"{source}{line}: not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{source}: not valid YAML: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(
            f"{source}:1: the top level must be a mapping of keys, not {type(data).__name__}"
        )
    return Document(data, lines, source)


def read_text(path: str | Path) -> str:
    """A regular file's text, at most MAX_BYTES; anything else is a one-line UserError."""
    return read_limited_text(path, "a YAML file", MAX_BYTES, "a recipe or site profile")


def load(path: str | Path) -> Document:
    """Read and parse a YAML file."""
    return parse(read_text(path), str(Path(path)))


def _unwrap(annotation: Any, tag: str | None = None) -> Any:
    """The model class inside Optional[...] / list[...] / dict[..., ...] / Annotated[...], if
    any; in a union of models, the one whose `kind` allows `tag` (a discriminated union, or
    core/model.py's ByKind)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        by_kind = next((m for m in annotation.__metadata__ if isinstance(m, ByKind)), None)
        named = by_kind.model_for(tag) if by_kind is not None and tag is not None else None
        return named or _unwrap(typing.get_args(annotation)[0], tag)
    if origin in (typing.Union, types.UnionType):
        models = [m for m in (_unwrap(a) for a in typing.get_args(annotation)) if m is not None]
        for model in models:
            kind = model.model_fields.get("kind")
            if tag is not None and kind is not None and tag in typing.get_args(kind.annotation):
                return model
        return models[0] if models else None
    if origin in (list, tuple, set, frozenset):
        return _unwrap(typing.get_args(annotation)[0], tag)
    if origin in (dict, Mapping):
        return _unwrap(typing.get_args(annotation)[1], tag)
    return annotation if hasattr(annotation, "model_fields") else None


def _bare(annotation: Any) -> Any:
    """The annotation inside Annotated[...] and Optional[...] (X | None)."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(
            annotation
        ):
            others = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(others) != 1:
                return annotation
            annotation = others[0]
        else:
            return annotation


def _tag(value: Any) -> str | None:
    """The `kind` of a mapping in the data, which picks its model in a discriminated union."""
    kind = value.get("kind") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else None


def _data_path(loc: tuple[Any, ...], data: Any) -> Path_:
    """An error location as a path through the data: pydantic puts a discriminated union's tag
    into the location (`runtime.shifter.modules` for `runtime: {kind: shifter, modules: ...}`)."""
    path: list[str | int] = []
    current = data
    for part in loc:
        if not isinstance(part, (str, int)) or part == "[key]":
            continue
        if isinstance(current, dict) and part not in current and current.get("kind") == part:
            continue  # the tag, not a key
        if isinstance(current, dict):
            path.append(str(part))  # as the file's lines are indexed: keys as text
            current = current.get(part)
            continue
        path.append(part)
        if isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        else:
            current = None
    return tuple(path)


def _model_at(model: Any, loc: Path_, data: Any = None) -> Any:
    """The model class at a data path (list indexes step into the list's items)."""
    annotation, value = model, data
    for part in loc:
        if isinstance(part, int):
            ok = isinstance(value, list) and 0 <= part < len(value)
            value = value[part] if ok else None
            continue
        if typing.get_origin(_bare(annotation)) in (dict, Mapping):
            annotation = typing.get_args(_bare(annotation))[1]  # a key of the mapping
            value = value.get(part) if isinstance(value, dict) else None
            continue
        current = _unwrap(annotation, _tag(value))
        if current is None:
            return None
        field = current.model_fields.get(part)
        if field is None:
            return None
        annotation = field.annotation
        value = value.get(part) if isinstance(value, dict) else None
    return _unwrap(annotation, _tag(value))


def allowed_keys(model: Any) -> list[str]:
    """The keys a model accepts, as spelled in YAML (aliases win)."""
    return [f.alias or name for name, f in model.model_fields.items()]


# pydantic's words for a value of the wrong type, as a person writing YAML says them
_PLAIN = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected a string",
    "list_type": "expected a list",
    "dict_type": "expected a mapping",
    "float_type": "expected a number",
}
_BOUNDS = {
    "greater_than_equal": "must be {ge} or more",
    "less_than_equal": "must be {le} or less",
    "greater_than": "must be more than {gt}",
}


def _problem_line(err: Any, model: Any, doc: Document, words: Mapping[str, str], data: Any) -> str:
    """One line for one error of a pydantic ValidationError."""
    # pydantic marks a bad mapping key with a trailing "[key]" in the location
    bad_key = bool(err["loc"]) and err["loc"][-1] == "[key]"
    loc = _data_path(err["loc"], data)
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    value = err.get("input")
    shown = "" if isinstance(value, (dict, list)) or value is None else f" (got {value!r})"
    if err["type"] == "extra_forbidden":
        parent = _model_at(model, loc[:-1], data)
        names = allowed_keys(parent) if parent is not None else []
        keys = ", ".join(names) or "?"
        near = did_you_mean(str(loc[-1]), names) if loc else ""
        return f"{doc.where(loc)}: {dotted}: unknown key{near} (allowed: {keys})"
    if err["type"] == "missing":
        return f"{doc.where(loc[:-1])}: {dotted}: required key is missing"
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        ctx = err.get("ctx") or {}
        allowed = ", ".join(re.findall(r"'([^']*)'", ctx.get("expected_tags", "")))
        key = ctx.get("discriminator", "kind").strip("'")
        where = (*loc, key)
        if err["type"] == "union_tag_not_found":
            return f"{doc.where(loc)}: {'.'.join(map(str, where))}: required key is missing (allowed: {allowed})"
        got = f" (got {ctx.get('tag')!r})" if "tag" in ctx else ""
        return f"{doc.where(where)}: {'.'.join(map(str, where))}: not allowed{got} (allowed: {allowed})"
    section = _model_at(model, loc, data) if err["type"] == "model_type" else None
    if section is not None:  # pydantic would say "a valid dictionary or instance of <Class>"
        keys = ", ".join(allowed_keys(section))
        return f"{doc.where(loc)}: {dotted}: expected a mapping (keys: {keys}){shown}"
    msg = _PLAIN.get(err["type"], err["msg"])
    if err["type"] in _BOUNDS:
        msg = _BOUNDS[err["type"]].format(**(err.get("ctx") or {}))
    if err["type"] == "literal_error":
        expected = re.findall(r"'([^']*)'", (err.get("ctx") or {}).get("expected", ""))
        return f"{doc.where(loc)}: {dotted}: not allowed{shown} (allowed: {', '.join(expected)})"
    if err["type"] == "string_pattern_mismatch":
        # a regular expression is no explanation: the model names its patterns in words
        pattern = (err.get("ctx") or {}).get("pattern", "")
        msg = f"not allowed (allowed: {words[pattern]})" if pattern in words else msg
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if bad_key:
        parent = ".".join(str(p) for p in loc[:-1]) or "(top level)"
        return f"{doc.where(loc)}: {parent}: key {err.get('input', loc[-1])!r}: {msg}"
    return f"{doc.where(loc)}: {dotted}: {msg}{shown}"


def format_validation_errors(
    exc: Any,
    model: Any,
    doc: Document,
    words: Mapping[str, str] | None = None,
    data: Any = None,
) -> list[str]:
    """Every error of a pydantic ValidationError, one line each, sorted by line."""
    data = doc.data if data is None else data
    return sort_by_line([_problem_line(err, model, doc, words or {}, data) for err in exc.errors()])


def validate(
    model: type[M],
    doc: Document,
    data: dict[str, Any] | None = None,
    words: Mapping[str, str] | None = None,
    context: Mapping[str, Any] | None = None,
) -> M:
    """Validate doc (or data derived from it) against model. Every error is a line; all of them
    are raised together (core.errors.Problems). words: the model's patterns said in words;
    context: what the model's validators may read that the model does not hold."""
    data = doc.data if data is None else data
    try:
        return model.model_validate(data, context=context)  # type: ignore[attr-defined, no-any-return]
    except ValidationError as exc:
        raise_problems(format_validation_errors(exc, model, doc, words, data))
        raise  # pragma: no cover - a ValidationError has at least one error


# ----------------------------------------------------------------------------- extends:


def deep_merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """child over parent: mappings merge, other values replace, null removes."""
    merged = dict(parent)
    for key, value in child.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class Layered(Document):
    """A file over the files it extends: line look-ups fall back to the file that set the key.

    inherited: what the files it extends give, merged (empty without extends:)."""

    def __init__(
        self, data: dict[str, Any], docs: list[Document], inherited: dict[str, Any] | None = None
    ) -> None:
        super().__init__(data, {}, docs[0].source)
        self.docs = docs
        self.inherited = inherited or {}

    def replaced_lists(self) -> list[tuple[str, list[Any]]]:
        """(FILE:LINE: key.path, the inherited items it drops) of each list the top file gives
        in place of an inherited one that has items it lacks: lists replace, they do not merge."""
        found: list[tuple[str, list[Any]]] = []

        def walk(mine: dict[str, Any], theirs: dict[str, Any], path: tuple[str, ...]) -> None:
            for key, value in mine.items():
                old = theirs.get(key)
                if isinstance(value, dict) and isinstance(old, dict):
                    walk(value, old, (*path, key))
                elif isinstance(value, list) and isinstance(old, list):
                    dropped = [item for item in old if item not in value]
                    if dropped:
                        where = self.docs[0].where((*path, key))
                        found.append((f"{where}: {'.'.join((*path, key))}", dropped))

        if len(self.docs) > 1:
            walk(self.docs[0].data, self.inherited, ())
        return found

    def where(self, path: Path_) -> str:
        for end in range(len(path), -1, -1):
            for doc in self.docs:
                line = doc.lines.get(tuple(path[:end]))
                if line is not None and (end > 0 or doc is self.docs[-1]):
                    return f"{doc.source}:{line}"
        return self.source


Resolver = Callable[[str, Path], Path]


def load_layered(
    path: Path, resolve: Resolver, what: str, admit: Callable[[Path], None] | None = None
) -> Layered:
    """The file at `path` over the files its `extends:` names, in turn (a chain, never a cycle,
    at most MAX_EXTENDS files): `resolve(name, path)` finds the file a name in `path` means;
    `what` says what a name may be; `admit(path)` may refuse a file before it is read."""
    data, docs = _layers(path, resolve, what, (), admit)
    if len(docs) == 1:
        return Layered(data, docs)
    parents: dict[str, Any] = {}
    for doc in reversed(docs[1:]):  # the farthest first, as _layers merged them
        parents = deep_merge(parents, {k: v for k, v in doc.data.items() if k != "extends"})
    return Layered(data, docs, parents)


MAX_EXTENDS = 32  # files in one extends: chain (a deeper one would exhaust the stack)


def _layers(
    path: Path,
    resolve: Resolver,
    what: str,
    seen: tuple[Path, ...],
    admit: Callable[[Path], None] | None,
) -> tuple[dict[str, Any], list[Document]]:
    resolved = path.resolve()
    if resolved in seen:
        chain = " -> ".join(str(p) for p in (*seen, resolved))
        raise UserError(f"{path}: extends forms a cycle: {chain}")
    if len(seen) >= MAX_EXTENDS:
        raise UserError(
            f"{seen[0]}: extends: a chain of more than {MAX_EXTENDS} files (at {path}); "
            "extend a file nearer the base"
        )
    if admit is not None:
        admit(path)
    doc = load(path)
    data = dict(doc.data)
    parent_ref = data.pop("extends", None)
    if parent_ref is None:
        return data, [doc]
    where = doc.where(("extends",))
    if not isinstance(parent_ref, str) or not parent_ref:
        raise UserError(f"{where}: extends: must be {what}")
    try:
        parent_path = resolve(parent_ref, path)
    except UserError as exc:
        raise UserError(f"{where}: extends: {exc}") from None
    if not parent_path.exists():
        raise UserError(
            f"{where}: extends: {parent_ref!r}: no such file (relative paths are looked up next "
            f"to {path.name}, then in the current directory)"
        )
    parent_data, parent_docs = _layers(parent_path, resolve, what, (*seen, resolved), admit)
    return deep_merge(parent_data, data), [doc, *parent_docs]
