"""Every built-in recipe's definition file builds, executed the way Apptainer builds one.

No Apptainer exists for Debian bookworm here, so the real Docker engine is the executor of
Apptainer's own steps (apptainer docs, "Definition Files"): bootstrap the base (a debootstrap
root: the project's own hvd-base/debian:<suite>, made the same way), copy %files, run %post with
`/bin/sh -e` in that root, then %test with %environment sourced. What runs is the rendered text
itself, not the Dockerfile: a %post that cannot run in a fresh root fails here.

cpu-bookworm-torch runs in .ci/run; the Horovod recipes (cpu-bookworm, and cpu-bookworm-tf-pt with
Horovod compiled against TensorFlow and PyTorch) under `make test-heavy`; the GPU ones under
`make test-gpu`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.build_fixtures import (
    CPU_RECIPE,
    GPU_RECIPE,
    GPU_TORCH_RECIPE,
    TF_RECIPE,
    TORCH_RECIPE,
)

pytestmark = pytest.mark.e2e

SECTION = "%"


def sections(text: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(the header's keywords, each %section's lines) of a definition file."""
    header: dict[str, str] = {}
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(SECTION) and line[1:].strip().isidentifier():
            current = found.setdefault(line[1:].strip(), [])
        elif current is not None:
            current.append(line)
        elif ":" in line:
            key, value = line.split(":", 1)
            header[key.strip()] = value.strip()
    return header, found


def built_like_apptainer(
    definition: str, folder: Path, pip_url: str
) -> subprocess.CompletedProcess:
    header, parts = sections(definition)
    assert header.get("Bootstrap") == "debootstrap", header  # the recipes' debootstrap bases
    image = f"hvd-base/debian:{header['OSVersion']}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "post.sh").write_text("\n".join(parts["post"]) + "\n")
    (folder / "environment.sh").write_text("\n".join(parts.get("environment", [])) + "\n")
    (folder / "test.sh").write_text("\n".join(parts.get("test", [])) + "\n")
    copies = [line.split() for line in parts.get("files", []) if line.strip()]
    steps = [f"cp -a /def/files/{i} {dest}" for i, (_src, dest) in enumerate(copies)]
    for i, (src, _dest) in enumerate(copies):
        (folder / "files").mkdir(exist_ok=True)
        subprocess.run(["cp", "-a", src, str(folder / "files" / str(i))], check=True)
    steps += ["/bin/sh -e /def/post.sh", ". /def/environment.sh && /bin/sh -e /def/test.sh"]
    argv = ["docker", "run", "--rm", "-e", f"HVD_PIP_CONFIG_URL={pip_url}",
            "-v", f"{folder}:/def:ro", image, "/bin/sh", "-ec", " && ".join(steps)]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=3600)


@pytest.mark.parametrize(
    "recipe_name",
    [
        TORCH_RECIPE,
        # Horovod compiled in a fresh root (6-7 min of .ci/run's 2 cores): its %post is the
        # Dockerfile's Horovod steps, printed by the other printer from the same block
        # instructions, which .ci/run builds with Docker (test_build_cpu.py); the torch
        # recipe's definition runs here in full, printer and all
        pytest.param(CPU_RECIPE, marks=pytest.mark.heavy),
        # Horovod compiled against TensorFlow and PyTorch: too long next to the rest of CI
        pytest.param(TF_RECIPE, marks=pytest.mark.heavy),
        pytest.param(GPU_TORCH_RECIPE, marks=pytest.mark.gpu),
        pytest.param(GPU_RECIPE, marks=pytest.mark.gpu),
    ],
)
def test_the_rendered_definition_builds_and_passes_its_checks(
    recipe_name: str, base_image: str, tmp_path: Path
) -> None:
    from hvd_container.containers.engine.docker_api import DockerEngine
    from hvd_container.containers.pipconfig import serve_host_pip_config
    from hvd_container.containers.recipe_loader import load_recipe
    from hvd_container.containers.render import render_definition

    recipe = load_recipe(recipe_name)
    definition = render_definition(recipe)
    gateway = DockerEngine().bridge_gateway()
    with serve_host_pip_config(gateway) as url:
        done = built_like_apptainer(definition, tmp_path / "def", url)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    # the %test lines are the recipe's checks: each ran (a check prints or asserts)
    assert recipe.checks and all(check in definition for check in recipe.checks)
