"""/.singularity.d/ content generated from the image config; scripts run with a real sh."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hvd_container.containers.sif.metadata import (
    ImageConfig,
    is_replaced,
    render_env_script,
    render_runscript,
    singularity_files,
)


def run_script(tmp_path: Path, text: str, *args: str) -> str:
    script = tmp_path / "runscript"
    script.write_text(text)
    return subprocess.run(
        ["sh", str(script), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.parametrize(
    ("entrypoint", "cmd", "args", "expected"),
    [
        # ENTRYPOINT + CMD: CMD is the default argument list, replaced by arguments.
        (["printf", "[%s]"], ["a b", "c"], [], "[a b][c]"),
        (["printf", "[%s]"], ["a b", "c"], ["x y"], "[x y]"),
        # ENTRYPOINT only: arguments appended.
        (["printf", "[%s]", "e"], [], [], "[e]"),
        (["printf", "[%s]", "e"], [], ["z"], "[e][z]"),
        # CMD only: arguments replace it entirely.
        ([], ["printf", "[%s]", "cmd"], [], "[cmd]"),
        ([], ["printf", "[%s]", "cmd"], ["printf", "<%s>", "$HOME"], "<$HOME>"),
    ],
)
def test_runscript_follows_oci_semantics(
    tmp_path: Path, entrypoint: list[str], cmd: list[str], args: list[str], expected: str
) -> None:
    assert run_script(tmp_path, render_runscript(entrypoint, cmd), *args) == expected


def test_runscript_without_entrypoint_or_cmd_starts_a_shell(tmp_path: Path) -> None:
    text = render_runscript([], [])
    assert "set -- /bin/sh" in text
    assert run_script(tmp_path, text, "echo", "ok") == "ok\n"


def test_env_script_exports_values_literally(tmp_path: Path) -> None:
    env = ["PATH=/opt/venv/bin:/usr/bin:/bin", "MSG=it's $HOME `x`", "EMPTY=", "BROKEN"]
    script = tmp_path / "env.sh"
    script.write_text(render_env_script(env))
    out = subprocess.run(
        ["sh", "-c", f'. {script}; printf "%s|%s|%s" "$PATH" "$MSG" "${{EMPTY-unset}}"'],
        capture_output=True,
        text=True,
        check=True,
        env={},
    ).stdout
    assert out == "/opt/venv/bin:/usr/bin:/bin|it's $HOME `x`|"


def test_files_and_labels() -> None:
    config = ImageConfig.from_docker(
        {"Env": ["A=1"], "Cmd": ["python"], "Labels": {"org.hvd-container.arch": "amd64"}}
    )
    files = singularity_files(config, {"org.hvd-container.arch": "amd64", "x": "y"})
    assert json.loads(files[".singularity.d/labels.json"]) == {
        "org.hvd-container.arch": "amd64",
        "x": "y",
    }
    assert "export A=1" in files[".singularity.d/env/10-docker2singularity.sh"]
    for action in ("exec", "run", "shell", "start", "test"):
        assert files[f".singularity.d/actions/{action}"].startswith("#!/bin/sh\n")
    assert config.oci_config() == {
        "Env": ["A=1"],
        "Cmd": ["python"],
        "Labels": {"org.hvd-container.arch": "amd64"},
    }


@pytest.mark.parametrize(
    ("name", "replaced"),
    [
        ("./.singularity.d", True),
        (".singularity.d/env/x.sh", True),
        ("/singularity", True),
        ("environment", True),
        ("etc/environment", False),
        (".singularity.dx", False),
        ("usr/bin/singularity", False),
    ],
)
def test_which_image_entries_are_replaced(name: str, replaced: bool) -> None:
    assert is_replaced(name) is replaced
