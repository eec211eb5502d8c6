from __future__ import annotations

import subprocess
import sys

from hvd_container import __version__
from hvd_container.cli import main


def test_version(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"hvd-container {__version__}"


def test_help_lists_command_groups(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage: hvd-container" in out


def test_console_script_runs_as_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hvd_container", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0
    assert done.stdout.strip().endswith(__version__)


def test_unknown_command_is_a_usage_error(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_ctrl_c_is_one_line_and_exit_130(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import containers.recipe

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(containers.recipe, "list_builtin", interrupted)
    assert main(["recipes", "list"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "hvd-container: interrupted"
