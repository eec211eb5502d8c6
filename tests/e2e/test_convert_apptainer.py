"""`convert --to sif --engine apptainer` as composed, with the real Docker engine and the
labelled Apptainer stand-in (tests/e2e/standins/apptainer: no Apptainer package exists for
Debian bookworm); plus the SIF's file mode on the native path."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.sif_fixtures import (  # noqa: F401 (fixtures)
    ROOT,
    cli,
    docker_client,
    shell_image,
    sif_tools,
)

pytestmark = pytest.mark.e2e


@pytest.fixture()
def umask_027() -> Iterator[int]:
    old = os.umask(0o027)
    yield 0o027
    os.umask(old)


@pytest.fixture()
def standin(tmp_path: Path) -> dict[str, str]:
    """Environment with the stand-in as `apptainer` first on PATH, asking the real engine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apptainer").symlink_to(ROOT / "tests" / "e2e" / "standins" / "apptainer")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "APPTAINER_STANDIN_DOCKER": "1",
        "APPTAINER_STANDIN_LOG": str(tmp_path / "calls.jsonl"),
        "APPTAINER_TMPDIR": str(scratch),
    }


def calls(env: dict[str, str]) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in Path(env["APPTAINER_STANDIN_LOG"]).read_text().splitlines()
    ]


def test_docker_daemon_build_as_composed(
    shell_image: str,  # noqa: F811
    standin: dict[str, str],
    tmp_path: Path,
    umask_027: int,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    target = out / "shell.sif"
    result = cli("convert", shell_image, "--to", "sif", "--engine", "apptainer", "-o", str(target),
                 env=standin)  # fmt: skip
    assert result.returncode == 0, result.stderr
    (call,) = calls(standin)
    assert call["argv"][:3] == ["apptainer", "build", "--force"]
    assert call["argv"][4] == f"docker-daemon://{shell_image}"  # found by the real engine
    assert call["tmpdir"] == standin["APPTAINER_TMPDIR"]  # the user's choice, as given
    assert f"running {standin['PATH'].split(':')[0]}/apptainer build --force" in result.stdout
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 & ~umask_027
    assert os.listdir(out) == ["shell.sif"]


def test_missing_image_is_one_line_and_the_tool_never_runs(
    docker_client: Any,  # noqa: F811
    standin: dict[str, str],
    tmp_path: Path,
) -> None:
    target = tmp_path / "x.sif"
    result = cli("convert", "hvd-test/no-such-image:1", "--to", "sif", "--engine", "apptainer",
                 "-o", str(target), env=standin)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == (
        "hvd-container: error: image 'hvd-test/no-such-image:1' not found in the local Docker "
        "engine\n"
    )
    assert not Path(standin["APPTAINER_STANDIN_LOG"]).exists()
    assert not target.exists()


def test_native_sif_mode_follows_the_umask(
    shell_image: str,  # noqa: F811
    sif_tools: None,  # noqa: F811
    tmp_path: Path,
    umask_027: int,
) -> None:
    target = tmp_path / "native.sif"
    result = cli("convert", shell_image, "--to", "sif", "-o", str(target))
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 & ~umask_027
