"""What the launcher knows about an image without running it: arch, MPI, controllers.

Facts come from a recipe (loaded lazily: the recipe model pulls in pydantic) or are left
unknown; unknown facts disable the checks that need them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImageFacts:
    """What is known about an image without running it (labels, or its recipe)."""

    source: str  # where the facts come from, for messages
    name: str | None = None
    version: str | None = None
    arch: str | None = None
    mpi_pmi: tuple[str, ...] | None = None  # PMI flavours the image's MPI speaks; () = no MPI
    controllers: tuple[str, ...] | None = None  # Horovod controllers built in
    tensor_ops: tuple[str, ...] | None = None  # Horovod tensor operations (nccl, mpi, gloo)
    gpu: bool | None = None
    mpi_family: str | None = None  # openmpi, mpich; "" = no MPI
    cuda: str | None = None  # the CUDA the image's framework was built for ("" = none)
    glibc: str | None = None  # the image's C library version
    lightning: bool | None = None  # PyTorch Lightning installed
    horovod: bool | None = None  # Horovod installed


def _pip_names(requirements: list[str]) -> set[str]:
    """Normalized project names of pip requirements ("pytorch_lightning>=2" -> pytorch-lightning)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    names: set[str] = set()
    for req in requirements:
        try:
            names.add(canonicalize_name(Requirement(req).name))
        except InvalidRequirement:
            continue  # not a named requirement (a URL, a path): names nothing here
    return names


def facts_from_recipe(ref: str) -> ImageFacts:
    """Facts of a built-in recipe name or a recipe file."""
    from hvd_container.containers.recipe import load_recipe

    recipe = load_recipe(ref, with_lock=False)  # facts need no lock: the image is built
    pip = _pip_names(recipe.pip)
    return ImageFacts(
        source=f"recipe {recipe.name}",
        name=recipe.name,
        version=recipe.version,
        arch=recipe.arch,
        mpi_pmi=tuple(recipe.mpi.pmi) if recipe.mpi is not None else (),
        controllers=tuple(recipe.horovod.controllers) if recipe.horovod is not None else None,
        gpu=recipe.gpu,
        mpi_family=recipe.mpi.flavor if recipe.mpi is not None else "",
        cuda=recipe.cuda.version if recipe.cuda is not None else "",
        lightning=recipe.lightning is not None or bool(pip & {"lightning", "pytorch-lightning"}),
        horovod=recipe.horovod is not None or "horovod" in pip,
    )
