"""The image's facts: what is known about an image without running it, and the labels that
record them.

`hvd-container build` verifies an image and records what it found as `org.hvd-container.*`
labels (`verified_labels`); they travel with the image into its SIF. A launch reads them back
(`facts_from_labels`: a SIF's labels, an image directory's labels.json, a Docker image's
labels) or, before there is an image, takes them from its recipe (`facts_from_recipe`). The
build side and the launch side both use this module; it imports neither of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

PREFIX = "org.hvd-container."

# The label names, each written in one place (below) and read in one place (facts_from_labels).
RECIPE_NAME = PREFIX + "recipe.name"
RECIPE_VERSION = PREFIX + "recipe.version"
RECIPE_DIGEST = PREFIX + "recipe.digest"
ARCH = PREFIX + "arch"
VERIFIED = PREFIX + "verified"
BUILD_DIGEST = PREFIX + "build.digest"  # the engine's digest of the build context
BOM = PREFIX + "bom.digest"  # sha256 of the bill of materials in the image (containers/bom.py)
BOM_FILE = "/opt/hvd/bom.cdx.json"  # where the image holds it
MPI_PMI = PREFIX + "mpi.pmi"
MPI_FAMILY = PREFIX + "mpi.family"
HOROVOD_FRAMEWORKS = PREFIX + "horovod.frameworks"
HOROVOD_CONTROLLERS = PREFIX + "horovod.controllers"
HOROVOD_TENSOR_OPS = PREFIX + "horovod.tensor_ops"
VERSIONS = (
    PREFIX + "versions."
)  # + python, torch, tensorflow, horovod, lightning, cuda, mpi, glibc, nccl
TORCH_DISTRIBUTED = PREFIX + "torch.distributed"  # the backends torch.distributed has: gloo,nccl
# the GPU code torch carries: sm_NN machine code and compute_NN PTX (its compiled arch flags)
TORCH_CUDA_ARCHS = PREFIX + "torch.cuda_archs"
# "true": the unversioned libcudart.so loads in the image (what a dynamically linked NCCL
# network plugin needs: CSCS's Container Engine hooks); "false": only libcudart.so.N
CUDART_LINK = PREFIX + "cuda.libcudart_so"
HOROVOD_CUDA_CC = PREFIX + "horovod.cuda_cc"  # the compute capabilities Horovod was built for
SIF_SOURCE_IMAGE = PREFIX + "sif.source-image"
SIF_SOURCE_ID = PREFIX + "sif.source-id"
VERIFY_RUN = PREFIX + "verify"  # marks the throw-away containers verification runs


def bom_digest(document: bytes) -> str:
    """The digest the label BOM records for a bill of materials."""
    return "sha256:" + hashlib.sha256(document).hexdigest()


BUILT_ARCHES = ("amd64", "arm64")  # what `build --arch` makes (arm64 under emulation on amd64)
RECIPE_SOURCE = "recipe "  # ImageFacts.source of a recipe's facts: "recipe NAME"


@dataclass(frozen=True)
class ImageFacts:
    """What is known about an image without running it; None: not known."""

    source: str  # where the facts come from, for messages ("image x.sif", "recipe cpu")
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
    torch: bool | None = None  # PyTorch installed
    torch_backends: tuple[str, ...] | None = None  # torch.distributed's: gloo, nccl, mpi
    controller: str | None = None  # the controller the recipe says its scripts use
    nccl: str | None = None  # the NCCL the image's framework loads ("" = none)
    # GPU code: torch's sm_NN/compute_NN (its arch flags); Horovod's compute capabilities
    # (sm_NN of each, and PTX of the highest: horovod's cmake/build_utils.py)
    torch_cuda_archs: tuple[str, ...] | None = None
    horovod_cuda_cc: tuple[str, ...] | None = None
    cudart_link: bool | None = None  # the unversioned libcudart.so loads (verify records it)

    @property
    def recipe_only(self) -> bool:
        """Whether these are a recipe's facts, with no image read (facts_from_recipe)."""
        return self.source.startswith(RECIPE_SOURCE)

    def gpu_code(self) -> list[tuple[str, tuple[str, ...]]]:
        """(whose, its sm_NN and compute_NN) for each framework whose GPU code is known."""
        found = []
        if self.torch_cuda_archs:
            found.append(("torch", self.torch_cuda_archs))
        if self.horovod_cuda_cc:
            ccs = sorted(self.horovod_cuda_cc, key=int)
            found.append(("horovod", (*(f"sm_{c}" for c in ccs), f"compute_{ccs[-1]}")))
        return found

    def known(self) -> dict[str, str]:
        """The facts that are known, as short text (doctor's summary line)."""
        shown = {
            "arch": self.arch,
            "mpi": self.mpi_family,
            "pmi": _joined(self.mpi_pmi),
            "controllers": _joined(self.controllers),
            "torch.distributed": _joined(self.torch_backends),
            "cuda": self.cuda,
            "glibc": self.glibc,
        }
        return {k: v or "none" for k, v in shown.items() if v is not None}


def _joined(values: tuple[str, ...] | None) -> str | None:
    return ",".join(values) if values is not None else None


def _names(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(v.strip().lower() for v in value.split(",") if v.strip())


# ------------------------------------------------------------------------------- writing


def recipe_labels(name: str, version: str, digest: str, arch: str) -> dict[str, str]:
    """The labels every image built from a recipe carries (Dockerfile LABEL, %labels)."""
    return {RECIPE_NAME: name, RECIPE_VERSION: version, RECIPE_DIGEST: digest, ARCH: arch}


def verified_labels(
    *,
    arch: str,
    horovod: tuple[Iterable[str], Iterable[str], Iterable[str]] | None,
    versions: Mapping[str, str],
    ok: bool,
    recipe: Any = None,
    torch_backends: Iterable[str] | None = None,
    torch_cuda_archs: Iterable[str] | None = None,
    cudart_link: bool | None = None,
) -> dict[str, str]:
    """What a verification found, as labels: `horovod` is check-build's (frameworks,
    controllers, tensor operations), `versions` the probe's package versions, `recipe` the
    recipe compared against (its name, version, digest and MPI)."""
    labels = {ARCH: arch}
    if horovod is not None:
        frameworks, controllers, tensor_ops = horovod
        labels[HOROVOD_FRAMEWORKS] = ",".join(sorted(frameworks))
        labels[HOROVOD_CONTROLLERS] = ",".join(sorted(controllers))
        labels[HOROVOD_TENSOR_OPS] = ",".join(sorted(tensor_ops))
    if torch_backends is not None:
        labels[TORCH_DISTRIBUTED] = ",".join(sorted(torch_backends))
    if torch_cuda_archs:
        labels[TORCH_CUDA_ARCHS] = ",".join(torch_cuda_archs)
    if cudart_link is not None:
        labels[CUDART_LINK] = "true" if cudart_link else "false"
    for key, value in sorted(versions.items()):
        labels[VERSIONS + key] = value
    labels[VERIFIED] = "true" if ok else "false"
    if recipe is not None:
        labels.update(recipe_labels(recipe.name, str(recipe.version), recipe.digest(), arch))
        if recipe.mpi is not None:
            labels[MPI_PMI] = ",".join(recipe.mpi.pmi)
            labels[MPI_FAMILY] = recipe.mpi.flavor
        if recipe.horovod is not None and recipe.horovod.cuda_cc:
            labels[HOROVOD_CUDA_CC] = ",".join(recipe.horovod.cuda_cc)
    return labels


def without_prefix(labels: Mapping[str, str]) -> dict[str, str]:
    """The build-fact labels with their common prefix taken off, sorted (what `inspect` shows)."""
    return {k[len(PREFIX) :]: v for k, v in sorted(labels.items()) if k.startswith(PREFIX)}


# ------------------------------------------------------------------------------- reading

# labels that say something about the image (others, like sif.source-image, do not)
_FACT_KEYS = (PREFIX + "recipe.", PREFIX + "horovod.", VERSIONS, ARCH, PREFIX + "mpi.")
RecipeLookup = Callable[[str], "ImageFacts | None"]


def facts_from_labels(
    labels: Mapping[str, str],
    source: str,
    arch: str | None = None,
    recipe_lookup: RecipeLookup | None = None,
) -> ImageFacts | None:
    """ImageFacts from build-fact labels; None if there are none. Facts an older build did not
    record (the MPI's PMI and family) come from `recipe_lookup(name)`: the built-in recipe of
    the labelled name, never a file the label names (a label is the image's word, not a path)."""
    facts = {k: v for k, v in labels.items() if isinstance(v, str) and k.startswith(PREFIX)}
    if not any(k.startswith(_FACT_KEYS) for k in facts):
        return None
    name = facts.get(RECIPE_NAME)
    known = None
    if name and recipe_lookup is not None and (MPI_PMI not in facts or MPI_FAMILY not in facts):
        found = recipe_lookup(name)
        known = found if found is not None and found.name == name else None
    mpi_pmi = _names(facts.get(MPI_PMI))
    if mpi_pmi is None and known is not None:
        mpi_pmi = known.mpi_pmi
    if mpi_pmi is None and VERSIONS + "mpi" in facts and not facts[VERSIONS + "mpi"]:
        mpi_pmi = ()  # verification found no mpirun
    probed = VERSIONS + "python" in facts  # verification's probe ran: what it omits is absent
    gpu = lightning = horovod = torch = None
    if VERSIONS + "cuda" in facts:
        gpu = bool(facts[VERSIONS + "cuda"])
    elif known is not None:
        gpu = known.gpu
    if probed:
        lightning = bool(facts.get(VERSIONS + "lightning"))
        horovod = bool(facts.get(VERSIONS + "horovod")) or HOROVOD_CONTROLLERS in facts
        torch = bool(facts.get(VERSIONS + "torch"))
    elif known is not None:
        lightning, horovod, torch = known.lightning, known.horovod, known.torch
    return ImageFacts(
        source=source,
        name=name,
        version=facts.get(RECIPE_VERSION) or (known.version if known else None),
        arch=facts.get(ARCH) or arch,
        mpi_pmi=mpi_pmi,
        controllers=_names(facts.get(HOROVOD_CONTROLLERS)),
        tensor_ops=_names(facts.get(HOROVOD_TENSOR_OPS)),
        glibc=facts.get(VERSIONS + "glibc") or None,
        gpu=gpu,
        mpi_family=facts.get(MPI_FAMILY, known.mpi_family if known else None),
        cuda=facts.get(VERSIONS + "cuda", known.cuda if known else None),
        lightning=lightning,
        horovod=horovod,
        torch=torch,
        torch_backends=_names(facts.get(TORCH_DISTRIBUTED)),
        nccl=facts.get(VERSIONS + "nccl", known.nccl if known else None),
        torch_cuda_archs=_names(facts.get(TORCH_CUDA_ARCHS)),
        horovod_cuda_cc=_names(facts.get(HOROVOD_CUDA_CC)),
        cudart_link={"true": True, "false": False}.get(facts.get(CUDART_LINK, "")),
    )


def _pip_names(requirements: Iterable[str]) -> set[str]:
    """Normalized project names of pip requirements ("pytorch_lightning>=2" -> pytorch-lightning)."""
    # with a recipe only (whose model loads it anyway): a dry run without one saves about 20 ms
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    names: set[str] = set()
    for req in requirements:
        try:
            names.add(canonicalize_name(Requirement(req).name))
        except InvalidRequirement:
            continue  # not a named requirement (a URL, a path): names nothing here
    return names


def facts_from_recipe(recipe: Any) -> ImageFacts:
    """The facts an image built from `recipe` (a containers.recipe.Recipe) will have."""
    pip = _pip_names(recipe.pip)
    return ImageFacts(
        source=f"{RECIPE_SOURCE}{recipe.name}",
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
        torch=recipe.pytorch is not None or "torch" in pip,
        controller=recipe.controller,
        nccl=recipe.nccl.version if recipe.nccl is not None else None,
        # CUDA from NVIDIA's wheels: the build links libcudart.so (containers/blocks/gpu_wheels.py)
        cudart_link=True if recipe.cuda is not None and recipe.cuda.source == "pip" else None,
        horovod_cuda_cc=(
            tuple(recipe.horovod.cuda_cc)
            if recipe.horovod is not None and recipe.horovod.cuda_cc
            else None
        ),
    )


def merged(image: ImageFacts, recipe: ImageFacts | None) -> ImageFacts:
    """The image's facts, with what they leave unknown taken from its recipe's."""
    if recipe is None:
        return image
    gaps = {
        f.name: getattr(recipe, f.name) for f in fields(image) if getattr(image, f.name) is None
    }
    return replace(image, **gaps)
