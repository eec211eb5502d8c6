"""A recipe's images for several architectures: built one after the other, each as a recipe of
its own (its lock, its tag NAME:VERSION-ARCH, its verification under emulation where it is not
this machine's), then pushed, then put under one OCI image index NAME:VERSION."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hvd_container.containers.build import BuildOptions, BuildResult, Reporter, build_recipe
from hvd_container.containers.engine import Engine
from hvd_container.containers.image_index import push_index
from hvd_container.containers.push import PushResult, auth_from_env, remote_ref
from hvd_container.containers.recipe import MultiArch
from hvd_container.containers.referrers import push_with_materials
from hvd_container.containers.transfer import OnTransfer


@dataclass(frozen=True)
class PushedSet:
    images: Sequence[tuple[str, PushResult]]  # (arch, pushed), in the recipe's order
    index: PushResult


def build_each(
    images: MultiArch, report: Reporter, options: BuildOptions, engine: Engine
) -> list[BuildResult]:
    """Build, verify and label each image; the first failure stops the rest."""
    results = []
    for recipe in images.images:
        report("info", "base", f"{images.index_tag}: the {recipe.arch} image, {recipe.image_tag}")
        results.append(build_recipe(recipe, report, options, engine=engine))
    return results


def push_each(
    images: MultiArch,
    registry: str,
    engine: Engine | None,
    note: Callable[[str], None],
    on_transfer: OnTransfer | None = None,
) -> PushedSet:
    """Push each built image (REGISTRY/NAME:VERSION-ARCH), then the index over them
    (REGISTRY/NAME:VERSION), annotated with the recipe's digest (every image's lock in it)."""
    repository, tag = remote_ref(images.index_tag, registry)
    auth = auth_from_env()
    pushed = [
        (recipe.arch, push_with_materials(engine, recipe.image_tag, registry, note, on_transfer))
        for recipe in images.images
    ]
    note(f"putting the image index {repository}:{tag} over {', '.join(images.arches)}")
    index = push_index(f"{repository}:{tag}", pushed, images.digest(), auth)
    return PushedSet(pushed, index)
