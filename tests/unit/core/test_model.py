"""core/model.py: the base of every model read from a file."""

from __future__ import annotations

import subprocess
import sys


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
