"""Recipe -> Dockerfile, Docker build context and Singularity definition.

Pure functions of the recipe: the same recipe always renders to the same bytes. The blocks
yield instruction records; each format has its own printer (containers/printers/).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hvd_container.containers.blocks import horovod_wheel, render_blocks, render_stages
from hvd_container.containers.blocks.base import debootstrap_image, debootstrap_script_args
from hvd_container.containers.instructions import Block, Copy, Stage
from hvd_container.containers.printers import dockerfile, singularity

if TYPE_CHECKING:
    from hvd_container.containers.recipe import LockedRecipe

FORMATS = ("docker", "singularity")


def _header(recipe: LockedRecipe) -> list[str]:
    return [
        f"Rendered by hvd-container from recipe {recipe.name} {recipe.version}.",
        "Do not edit: change the recipe and render again.",
    ]


def _blocks(recipe: LockedRecipe) -> list[Block]:
    return [block for _, block in render_blocks(recipe)]


def render_dockerfile(recipe: LockedRecipe) -> str:
    """The Dockerfile of the recipe: its stages (Horovod's wheel first, where it has one), each
    block in layer order."""
    return dockerfile.dockerfile(_header(recipe), render_stages(recipe)).text


@dataclass(frozen=True)
class DockerBuild:
    """What a Docker build of the recipe needs, from one rendering of its blocks: every file of
    the context by its path there (the Dockerfile among them), the base image FROM names, and
    each build step's phase (index = step - 1)."""

    context: dict[str, bytes]
    base: str
    phases: tuple[str, ...]
    stage_sizes: tuple[int, ...] = ()  # each stage's steps (buildah numbers them per stage)

    def step_of(self, stage: int | None, step: int) -> int:
        """The classic builder's step number (all stages counted) of a stage's step."""
        return step if stage is None else sum(self.stage_sizes[: stage - 1]) + step

    @property
    def dockerfile(self) -> str:
        return self.context["Dockerfile"].decode()


def docker_build(recipe: LockedRecipe, wheel_image: str | None = None) -> DockerBuild:
    """The recipe's build. wheel_image: an image that holds Horovod's compiled wheel already
    (containers/wheel_cache.py): the wheel stage starts from it, and nothing compiles."""
    stages = render_stages(recipe)
    if wheel_image is not None:
        stages = [
            horovod_wheel.from_image(wheel_image) if stage.name == horovod_wheel.STAGE else stage
            for stage in stages
        ]
    return _docker_build(_header(recipe), stages)


def wheel_build(recipe: LockedRecipe) -> DockerBuild | None:
    """Horovod's stages alone, ending in an image that holds only the wheel; None for a recipe
    without them. No header: a recipe's name and version are not inputs of the compile, so two
    recipes that compile the same have the same context (and the same digest)."""
    stages = render_stages(recipe)
    if len(stages) == 1:
        return None
    return _docker_build([], [*stages[:-1], horovod_wheel.carrier()])


def _docker_build(header: list[str], stages: list[Stage]) -> DockerBuild:
    printed = dockerfile.dockerfile(header, stages)
    context = {"Dockerfile": printed.text.encode()}
    for block in (block for stage in stages for block in stage.blocks):
        context.update({i.source: i.data for i in block.items if isinstance(i, Copy)})
    return DockerBuild(context, printed.base, printed.phases, printed.stage_sizes)


def build_digest(context: Mapping[str, bytes], base_id: str | None = None) -> str:
    """sha256 over the rendered build context (Dockerfile + every input file), order-free,
    and the ID of the base image the build starts from (None: not in the engine).

    The base ID is part of it because `FROM name` names a local image that can be remade under
    the same name (`testbed/base-image.sh --force`, a newer pull): the context is then unchanged
    but the image built from it is not up to date any more.
    """
    h = hashlib.sha256()
    h.update(f"base\0{base_id or ''}\0".encode())
    for name in sorted(context):
        data = context[name]
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def build_context(recipe: LockedRecipe) -> dict[str, bytes]:
    """Every file the Docker build needs, by path inside the context."""
    return docker_build(recipe).context


def dockerfile_needs(recipe: LockedRecipe) -> str:
    """What a rendered Dockerfile needs besides itself to build: the files it copies, and a
    `debootstrap:` base made locally."""
    files = sorted(name for name in build_context(recipe) if name != "Dockerfile")
    named = ", ".join(files[:-1]) + (" and " if len(files) > 1 else "") + files[-1] if files else ""
    needs = [f"{named} beside it"] if files else []
    suite = recipe.base.debootstrap_suite
    if suite:
        image = debootstrap_image(suite, recipe.arch)
        made = " ".join(["testbed/base-image.sh", *debootstrap_script_args(suite, recipe.arch)])
        needs.append(f"the local base image {image} ({made} makes it)")
    if not needs:
        return ""
    return (
        f"`docker build` also needs {', and '.join(needs)}: `render --context DIR` writes the "
        "whole build context"
    )


def render_definition(recipe: LockedRecipe, *, docker_bootstrap: bool = False) -> str:
    """The Singularity/Apptainer definition, written natively from the same blocks.

    docker_bootstrap: a `debootstrap:<suite>` base starts from Docker's debian:<suite> instead
    (for build hosts without debootstrap, rare on RHEL/SLES login nodes)."""
    return singularity.definition(
        _header(recipe), _blocks(recipe), docker_bootstrap=docker_bootstrap
    )


def render(recipe: LockedRecipe, fmt: str) -> str:
    if fmt == "docker":
        return render_dockerfile(recipe)
    if fmt == "singularity":
        return render_definition(recipe)
    raise ValueError(f"unknown format {fmt!r} (allowed: {', '.join(FORMATS)})")
