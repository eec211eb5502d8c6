"""core/model.py: the base of every model read from a file."""

from __future__ import annotations

import subprocess
import sys

from hvd_container.containers import recipe  # noqa: F401  (its models)
from hvd_container.launcher import runtimes
from hvd_container.launcher.sites import model  # noqa: F401  (its models)

from hvd_container.core.model import Strict


def test_the_site_model_builds_no_validator_when_imported() -> None:
    """Models build their validators on first use (core/model.py's defer_build): importing the
    site model for a dry run pays for the classes, not for the schema of every runtime."""
    code = (
        "from hvd_container.launcher.sites.model import Site\n"
        "from hvd_container.launcher import runtimes\n"
        "models = [Site, *runtimes.profiles()]\n"
        "print(sum(m.__pydantic_complete__ for m in models), len(models))\n"
        "Site.model_validate({'name': 'x', 'runtime': {'kind': 'none'}})\n"
        "print(Site.__pydantic_complete__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    built, later = done.stdout.split("\n")[:2]
    assert built.split()[0] == "0" and int(built.split()[1]) > 2
    assert later == "True"


def _models(base: type) -> list[type]:
    found = []
    for sub in base.__subclasses__():
        found += [sub, *_models(sub)]
    return found


def test_no_model_field_defaults_through_a_builtin_factory() -> None:
    """Field(default_factory=list) costs every validator build a tokenizer pass over list's
    text signature (core/model.py's empty_list says why): the models use empty_list/_dict."""
    runtimes.profiles()  # every runtime's module, with its profile model
    models = _models(Strict)
    builtin = [
        f"{m.__module__}.{m.__name__}.{name}"
        for m in models
        for name, field in m.model_fields.items()
        if field.default_factory in (list, dict, set, tuple)
    ]
    assert len(models) > 20
    assert builtin == []
