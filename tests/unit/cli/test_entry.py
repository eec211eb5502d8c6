"""The program's entry (cli/entry.py): the collector waits while the CLI and the command load,
then runs again with what they made frozen; the exit code is the CLI's. Each case runs in a
new interpreter, as the console script does, so that this process's collector is untouched."""

from __future__ import annotations

import subprocess
import sys

# a command whose module is loaded (`sites list` reads the built-in profiles), run through the
# entry, with the collector's state recorded when the command's module is asked for
_PROGRAM = """
import gc, sys
import hvd_container.cli.commands as commands

loaded_with = []
real_load = commands.load

def load(name):
    loaded_with.append(gc.isenabled())
    return real_load(name)

commands.load = load  # before cli.app takes the name
{before}
from hvd_container.cli.entry import main

code = main({argv!r})
print("RESULT", code, loaded_with, gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr)
"""


def _run(argv: list[str], before: str = "") -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM.format(argv=argv, before=before)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.rsplit("RESULT ", 1)[1].split(maxsplit=1)


def test_the_collector_waits_while_the_command_loads_and_runs_after() -> None:
    code, state = _run(["sites", "list"])
    assert code == "0"
    # held while the command's module loaded; enabled again after, with what it made frozen
    assert state.split() == ["[False]", "True", "True"]


def test_the_entry_returns_the_cli_exit_code_and_resumes_collection_on_a_usage_error() -> None:
    code, state = _run(["run", "--no-such-flag", "x.py"])
    assert code == "2"
    assert state.split() == ["[False]", "True", "True"]


def test_a_caller_that_turned_the_collector_off_keeps_it_off() -> None:
    code, state = _run(["sites", "list"], before="gc.disable()")
    assert code == "0"
    assert state.split() == ["[False]", "False", "False"]
