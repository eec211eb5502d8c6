"""The base of every model read from a YAML file (recipes, site profiles), and the string types
they share. core/yamlconf.py validates a file against such a model, one line per error.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import core_schema

from hvd_container.core.text import LINE_ENDS_ALLOWED, has_line_ends

# fullmatch, not match with $: `$` also matches before a trailing newline
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Strict(BaseModel):
    """Unknown keys are errors; values are not coerced between types; nothing changes it."""

    # defer_build: a model's validator is built when it first validates, not when its module is
    # imported: a dry run validates one site profile and built every model it imported (all
    # the runtimes' profiles on their own, the recipe's), about 10 ms (bench/dryrun.py)
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


@dataclass(frozen=True)
class ByKind:
    """`Annotated[Base, ByKind(model_for, models)]`: a mapping validated by the one model its
    `kind` names, as a discriminated union of `models()` validates it, without building the
    others' validators or asking `model_for` about them (a site profile names one or two of the
    eight runtimes, whose modules then stay unloaded: about 7 ms of a dry run, bench/dryrun.py).
    A `kind` no model takes is judged by the whole union, so its error is the union's (the
    allowed kinds); the JSON schema is the union's."""

    model_for: Callable[[str], type[BaseModel] | None]  # the model of a kind; None: unknown
    models: Callable[[], tuple[type[BaseModel], ...]]  # every model, each with its `kind`

    def model_of(self, value: Any) -> type[BaseModel] | None:
        """The model the value's `kind` names (a mapping's key, a model's field), if any."""
        kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
        return self.model_for(kind) if isinstance(kind, str) else None

    def _validate(self, value: Any, info: core_schema.ValidationInfo) -> Any:
        model = self.model_of(value)
        if model is None:
            return _union(self).validate_python(value, context=info.context)
        return model.model_validate(value, context=info.context)

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.with_info_plain_validator_function(self._validate)

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        return handler(_union(self).core_schema)


@functools.cache
def _union(by_kind: ByKind) -> TypeAdapter[Any]:
    """The discriminated union of every model of `by_kind` (for errors and the JSON schema)."""
    # a union made at run time: to pydantic >= 2.14's TypeForm-typed constructor, a value of Any
    union: Any = Annotated[Union[by_kind.models()], Field(discriminator="kind")]  # noqa: UP007
    return TypeAdapter(union)


def empty_list() -> list[Any]:
    """A model field's default of [] (Field(default_factory=empty_list)).

    Not `default_factory=list`: pydantic asks each factory for its signature when it builds a
    model's validator, and Python 3.11 reads a builtin's from its text with the tokenizer
    (compiling the tokenizer's pattern first), about 2 ms of a dry run's site profile."""
    return []


def empty_dict() -> dict[Any, Any]:
    """A model field's default of {} (as empty_list, for dicts)."""
    return {}


def one_line(value: str) -> str:
    """A value that stays on the line it is written on (an argv word, a #SBATCH line, a RUN)."""
    if has_line_ends(value):
        raise ValueError(LINE_ENDS_ALLOWED)
    return value


def env_name(key: str) -> str:
    if not _ENV_NAME.fullmatch(key):
        raise ValueError(
            "not an environment variable name (allowed: letters, digits and _, "
            "not starting with a digit)"
        )
    return key


Line = Annotated[str, AfterValidator(one_line)]
EnvName = Annotated[str, AfterValidator(env_name)]
# a controller's name as a recipe or a site declares it; the launcher checks it is one it has
ControllerName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")]
# a recipe's or a site's name (an image repository name, a profile file's stem)
NAME_PATTERN = r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$"
NAME_WORDS = (
    "lower-case letters and digits in parts joined by one '.', '_' or '-', e.g. cpu-bookworm"
)
