"""The base of every model read from a YAML file (recipes, site profiles), and the string types
they share. core/yamlconf.py validates a file against such a model, one line per error.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from hvd_container.core.text import LINE_ENDS_ALLOWED, has_line_ends

# fullmatch, not match with $: `$` also matches before a trailing newline
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Strict(BaseModel):
    """Unknown keys are errors; values are not coerced between types; nothing changes it."""

    # defer_build: a model's validator is built when it first validates, not when its module is
    # imported: a dry run validates one site profile and built every model it imported (all
    # the runtimes' profiles on their own, the recipe's), about 10 ms (bench/dryrun.py)
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


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
