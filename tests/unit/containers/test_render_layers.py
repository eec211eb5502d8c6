"""Layer order: a change to a late, small part of a recipe changes only the tail of the Dockerfile,
so Docker's cache keeps every earlier layer."""

from __future__ import annotations

from pathlib import Path

from _recipe_helpers import CPU_RECIPE, GPU_RECIPE, merged, write
from hvd_container.containers.convert.from_dockerfile import instructions
from hvd_container.containers.recipe_loader import load_recipe
from hvd_container.containers.render import render_dockerfile


def first_difference(a: list[str], b: list[str]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def differing_from(tmp_path: Path, before: dict, after: dict) -> tuple[list[str], int]:  # type: ignore[type-arg]
    a = instructions(render_dockerfile(load_recipe(write(tmp_path, before, "a.yaml"))))
    b = instructions(render_dockerfile(load_recipe(write(tmp_path, after, "b.yaml"))))
    return a, first_difference(a, b)


def test_pip_extra_change_only_rebuilds_from_the_pip_layer(tmp_path: Path) -> None:
    before = merged(GPU_RECIPE, apt=["vim"], pip=["rich"])
    after = merged(GPU_RECIPE, apt=["vim"], pip=["rich", "pandas"])
    lines, at = differing_from(tmp_path, before, after)
    assert lines[at] == "RUN hvd-pip install --no-cache-dir rich"
    assert any("horovod==0.28.1" in line for line in lines[:at])
    assert any("apt-get install -y --no-install-recommends vim" in line for line in lines[:at])


def test_env_change_keeps_every_install_layer(tmp_path: Path) -> None:
    lines, at = differing_from(
        tmp_path,
        merged(CPU_RECIPE, pip=["rich"], checks=["python -c 'import torch'"]),
        merged(CPU_RECIPE, pip=["rich"], checks=["python -c 'import torch'"], env={"A": "1"}),
    )
    assert lines[at] == 'LABEL org.hvd-container.recipe.name="t"'  # where ENV A is inserted
    assert [line for line in lines[at:] if line.startswith("RUN")] == [
        "RUN python -c 'import torch'"
    ]
    assert any("hvd-pip install --no-cache-dir rich" in line for line in lines[:at])


def test_check_change_is_the_last_layer(tmp_path: Path) -> None:
    lines, at = differing_from(
        tmp_path, merged(CPU_RECIPE, checks=["true"]), merged(CPU_RECIPE, checks=["false"])
    )
    # Only the digest label and the check itself differ.
    assert lines[at].startswith('LABEL org.hvd-container.recipe.digest="')
    assert lines[at + 1 :] == ['LABEL org.hvd-container.arch="amd64"', "RUN true"]


def test_framework_change_keeps_base_python_and_mpi(tmp_path: Path) -> None:
    lines, at = differing_from(
        tmp_path,
        GPU_RECIPE,
        merged(GPU_RECIPE, tensorflow={"version": "2.10.0"}),
    )
    assert lines[at] == "RUN hvd-pip install --no-cache-dir tensorflow==2.10.1"
    assert any("openmpi-bin" in line for line in lines[:at])
    assert any("libnccl2=" in line for line in lines[:at])


def test_no_secrets_or_host_paths_in_any_layer(tmp_path: Path) -> None:
    text = render_dockerfile(load_recipe(write(tmp_path, GPU_RECIPE)))
    for needle in ("PIP_CERT", "PIP_CONFIG_FILE", "ca-certificates.crt", "/opt/wheels", "file://"):
        assert needle not in text
    assert "ENV HVD_PIP_CONFIG_URL" not in text


def test_a_stages_own_step_number_maps_to_the_classic_builders() -> None:
    """buildah's `[2/3] STEP 6/6` is the classic builder's step 13 + 6 when the first stage has
    13 instructions: the phase and the step shown are the same under both engines."""
    from hvd_container.containers.recipe_loader import load_recipe
    from hvd_container.containers.render import docker_build

    build = docker_build(load_recipe("cpu-bookworm"))
    assert len(build.stage_sizes) == 3 and sum(build.stage_sizes) == len(build.phases)
    first, second, _third = build.stage_sizes
    assert build.step_of(None, 5) == 5
    assert build.step_of(1, 5) == 5
    assert build.step_of(2, second) == first + second
    assert build.phases[build.step_of(2, second) - 1] == "horovod"
    assert build.step_of(3, 1) == first + second + 1
