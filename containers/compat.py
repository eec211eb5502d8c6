"""Combinations known from the field not to work, refused with the reason and the fix.

Each rule is a function (recipe) -> (key path, message) | None; `check_compatibility` raises
every failure at once, each a line pointing at the recipe line that set the key.
The version tables list what upstream published; versions not in a table are not judged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from hvd_container.core import yamlconf
from hvd_container.core.errors import raise_problems, sort_by_line
from hvd_container.core.text import ascii_digits

if TYPE_CHECKING:
    from hvd_container.containers.recipe import Recipe

Problem = tuple[tuple[str, ...], str]
Rule = Callable[["Recipe"], Problem | None]

# Python minor versions with wheels on PyPI, per release line (tested build configurations).
TENSORFLOW_PYTHONS: dict[str, tuple[int, int]] = {
    "2.4": (6, 8),
    "2.5": (6, 9),
    "2.6": (6, 9),
    "2.7": (7, 9),
    "2.8": (7, 10),
    "2.9": (7, 10),
    "2.10": (7, 10),
    "2.11": (7, 10),
    "2.12": (8, 11),
    "2.13": (8, 11),
    "2.14": (9, 11),
    "2.15": (9, 11),
    "2.16": (9, 12),
    "2.17": (9, 12),
    "2.18": (9, 12),
    "2.19": (9, 12),
    "2.20": (9, 13),
}
PYTORCH_PYTHONS: dict[str, tuple[int, int]] = {
    "1.8": (6, 9),
    "1.9": (6, 9),
    "1.10": (6, 9),
    "1.11": (7, 10),
    "1.12": (7, 10),
    "1.13": (7, 11),
    "2.0": (8, 11),
    "2.1": (8, 11),
    "2.2": (8, 12),
    "2.3": (8, 12),
    "2.4": (8, 12),
    "2.5": (9, 13),
    "2.6": (9, 13),
    "2.7": (9, 13),
    "2.8": (9, 13),
}
# CUDA wheel tags published on download.pytorch.org per release line.
PYTORCH_CUDA_TAGS: dict[str, tuple[str, ...]] = {
    "1.11": ("cpu", "cu102", "cu113", "cu115"),
    "1.12": ("cpu", "cu102", "cu113", "cu116"),
    "1.13": ("cpu", "cu116", "cu117"),
    "2.0": ("cpu", "cu117", "cu118"),
    "2.1": ("cpu", "cu118", "cu121"),
    "2.2": ("cpu", "cu118", "cu121"),
    "2.3": ("cpu", "cu118", "cu121"),
    "2.4": ("cpu", "cu118", "cu121", "cu124"),
    "2.5": ("cpu", "cu118", "cu121", "cu124"),
}
# Lightning release line -> oldest torch it supports.
LIGHTNING_MIN_TORCH: dict[str, str] = {
    "2.0": "1.11",
    "2.1": "1.12",
    "2.2": "1.13",
    "2.3": "2.0",
    "2.4": "2.1",
    "2.5": "2.1",
}
# System python per distribution release (what `apt-get install python3.X` can give).
DISTRIBUTION_PYTHONS: dict[str, tuple[str, ...]] = {
    "debian:bullseye": ("3.9",),
    "debian:bookworm": ("3.11",),
    "debian:trixie": ("3.13",),
    "ubuntu:20.04": ("3.8", "3.9"),
    "ubuntu:22.04": ("3.10", "3.11"),
    "ubuntu:24.04": ("3.12",),
}


def _line(version: str) -> str:
    """`2.10.1` -> `2.10`."""
    return ".".join(version.split("+")[0].split(".")[:2])


def _v(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _python_minor(recipe: Recipe) -> int:
    return int(recipe.python.version.split(".")[1])


# The `srun --mpi=` plugins the PMI client of each distribution MPI package works with.
DISTRIBUTION_MPI_PMI: dict[str, tuple[str, ...]] = {
    # Debian and Ubuntu build Open MPI 4.x against PMIx only (no Slurm PMI-1/PMI-2 support).
    "openmpi": ("pmix",),
    # MPICH's built-in PMI client speaks the PMI-1 wire protocol, which Slurm's pmi2 plugin
    # serves; it has no PMIx client.
    "mpich": ("pmi2",),
}


def distribution_mpi_pmi(recipe: Recipe) -> Problem | None:
    """mpi.pmi is what the image's MPI speaks; the launcher trusts it when choosing --mpi."""
    mpi = recipe.mpi
    if mpi is None or mpi.source != "apt":
        return None
    speaks = DISTRIBUTION_MPI_PMI[mpi.flavor]
    wrong = [pmi for pmi in mpi.pmi if pmi not in speaks]
    if not wrong:
        return None
    if mpi.flavor == "openmpi":
        why = (
            "the distribution's Open MPI is built with PMIx only: under srun --mpi=pmi2 every "
            'rank aborts in MPI_Init ("OMPI was not built with SLURM\'s PMI support")'
        )
        fix = "use pmi: [pmix] (srun --mpi=pmix), or flavor: mpich for srun --mpi=pmi2"
    else:
        why = "the distribution's MPICH has no PMIx client (its PMI-1 client is served by srun --mpi=pmi2)"
        fix = "use pmi: [pmi2], or flavor: openmpi for srun --mpi=pmix"
    return (("mpi", "pmi"), f"{', '.join(wrong)}: {why}: {fix}")


def horovod_cxx_patch(recipe: Recipe) -> Problem | None:
    """Horovod <= 0.28.1 sets C++14; torch >= 2.1 headers need C++17, torch >= 2.14 C++20."""
    hvd, torch = recipe.horovod, recipe.pytorch
    if hvd is None or torch is None or "pytorch" not in hvd.frameworks:
        return None
    hvd_version, torch_version = _v(hvd.version), _v(torch.version)
    if hvd_version is None or torch_version is None:
        return None  # not judged; the recipe model only lets PEP 440 versions through
    if hvd_version > Version("0.28.1") or "cxx20" in hvd.patches:
        return None
    if torch_version >= Version("2.14"):
        return (
            ("horovod", "patches"),
            f"horovod {hvd.version} does not compile against torch {torch.version} "
            "(its CMake files set C++14, torch >= 2.14 headers need C++20): add `cxx20` to "
            "horovod.patches",
        )
    if torch_version >= Version("2.1") and "cxx17" not in hvd.patches:
        return (
            ("horovod", "patches"),
            f"horovod {hvd.version} does not compile against torch {torch.version} "
            "(its CMake files set C++14, torch >= 2.1 headers need C++17): add `cxx17` to "
            "horovod.patches",
        )
    return None


def tensorflow_python_wheels(recipe: Recipe) -> Problem | None:
    tf = recipe.tensorflow
    if tf is None or tf.source != "pip":
        return None
    span = TENSORFLOW_PYTHONS.get(_line(tf.version))
    if span is None or span[0] <= _python_minor(recipe) <= span[1]:
        return None
    return (
        ("tensorflow", "version"),
        f"tensorflow {tf.version} has no wheels for Python {recipe.python.version} "
        f"(only 3.{span[0]} to 3.{span[1]}): change python.version or tensorflow.version",
    )


def tensorflow_cuda_major(recipe: Recipe) -> Problem | None:
    """TensorFlow's pip wheels are built for CUDA 11 up to 2.14 and for CUDA 12 from 2.15."""
    tf = recipe.tensorflow
    if tf is None or tf.source != "pip" or recipe.cuda is None:
        return None
    version = _v(_line(tf.version))
    if version is None or version < Version("2.5"):
        return None
    wants = "12" if version >= Version("2.15") else "11"
    has = recipe.cuda.version.split(".")[0]
    if has == wants:
        return None
    return (
        ("tensorflow", "version"),
        f"tensorflow {tf.version} wheels are built for CUDA {wants}, the image has CUDA "
        f"{recipe.cuda.version}",
    )


def tensorflow_gpu_package_retired(recipe: Recipe) -> Problem | None:
    tf = recipe.tensorflow
    if tf is None or tf.package != "tensorflow-gpu":
        return None
    version = _v(_line(tf.version))
    if version is None or version < Version("2.12"):
        return None
    return (
        ("tensorflow", "package"),
        f"tensorflow-gpu has no release {tf.version} (it ended with 2.11; `tensorflow` includes "
        "GPU support): use package: tensorflow",
    )


def pytorch_python_wheels(recipe: Recipe) -> Problem | None:
    torch = recipe.pytorch
    if torch is None or torch.source != "pip":
        return None
    span = PYTORCH_PYTHONS.get(_line(torch.version))
    if span is None or span[0] <= _python_minor(recipe) <= span[1]:
        return None
    return (
        ("pytorch", "version"),
        f"torch {torch.version} has no wheels for Python {recipe.python.version} "
        f"(only 3.{span[0]} to 3.{span[1]}): change python.version or pytorch.version",
    )


def pytorch_cuda_tag_published(recipe: Recipe) -> Problem | None:
    torch = recipe.pytorch
    if torch is None or torch.source != "pip" or torch.cuda_tag is None:
        return None
    tags = PYTORCH_CUDA_TAGS.get(_line(torch.version))
    if tags is None or torch.cuda_tag in tags:
        return None
    return (
        ("pytorch", "cuda_tag"),
        f"torch {torch.version} was not published for {torch.cuda_tag} "
        f"(allowed: {', '.join(tags)})",
    )


# The CUDA build PyPI's own Linux torch wheels are (checked in their metadata: the nvidia-*
# wheels they depend on); other releases are not judged.
PYPI_TORCH_CUDA = {"1.13": "cu117", "2.14": "cu130"}


def pypi_torch_cuda_build(recipe: Recipe) -> Problem | None:
    """`wheel_index: pypi` takes PyPI's build of torch: its CUDA version is the one PyPI has."""
    torch = recipe.pytorch
    if torch is None or torch.wheel_index != "pypi" or torch.cuda_tag is None:
        return None
    built = PYPI_TORCH_CUDA.get(_line(torch.version))
    if built is None or built == torch.cuda_tag:
        return None
    return (
        ("pytorch", "cuda_tag"),
        f"PyPI's torch {torch.version} is the {built} build, not {torch.cuda_tag}: set "
        f"cuda_tag: {built}, or take {torch.cuda_tag} wheels from the PyTorch index "
        "(wheel_index: download.pytorch.org)",
    )


def gpu_build_names_its_gpus(recipe: Recipe) -> Problem | None:
    """An NCCL Horovod build without cuda_cc compiles every architecture nvcc lists (12 with
    CUDA 13): name the site's GPUs."""
    hvd = recipe.horovod
    if hvd is None or hvd.gpu_operations != "nccl" or hvd.cuda_cc:
        return None
    return (
        ("horovod", "gpu_operations"),
        "an NCCL build needs horovod.cuda_cc, the compute capabilities of the site's GPUs "
        "(e.g. [80] for A100, [70, 80] for V100 and A100, [90] for H100/GH200)",
    )


def pytorch_companions_match(recipe: Recipe) -> Problem | None:
    """torchvision/torchaudio are built for one torch release each."""
    torch = recipe.pytorch
    if torch is None:
        return None
    parts = _line(torch.version).split(".")
    if len(parts) != 2 or not all(ascii_digits(x) for x in parts):
        return None
    major, minor = int(parts[0]), int(parts[1])
    if major == 1:
        expected = {"torchvision": f"0.{minor + 1}", "torchaudio": f"0.{minor}"}
    else:
        expected = {"torchvision": f"0.{minor + 15}", "torchaudio": f"{major}.{minor}"}
    for name, want in expected.items():
        have = getattr(torch, name)
        if have is not None and _line(have) != want:
            return (
                ("pytorch", name),
                f"{name} {have} does not match torch {torch.version} (needs {name} {want}.x)",
            )
    return None


def no_wheels_on_ppc64le(recipe: Recipe) -> Problem | None:
    """PyPI has no TensorFlow or PyTorch wheels for ppc64le."""
    if recipe.arch != "ppc64le":
        return None
    for key in ("tensorflow", "pytorch"):
        section = getattr(recipe, key)
        if section is not None and section.source == "pip":
            return (
                (key, "source"),
                f"{key} has no pip wheels for ppc64le: use a base image that ships it and set "
                f"{key}.source: image",
            )
    return None


def cuda_comes_from_base_image(recipe: Recipe) -> Problem | None:
    """CUDA is not installed by a block: the base image must be a CUDA image of that version."""
    if recipe.cuda is None or recipe.cuda.source != "image":
        return None
    image = recipe.base.image
    if recipe.base.debootstrap_suite:
        return (
            ("cuda", "source"),
            "CUDA comes from the base image, a debootstrap base has none: set cuda.source: pip "
            "(NVIDIA's cuda-toolkit wheels), or use an nvidia/cuda:<version>-cudnn8-devel-<os> "
            "or NGC base image",
        )
    match = re.match(r"^(?:[\w.-]+/)?nvidia/cuda:(\d+\.\d+(?:\.\d+)?)-", image)
    if match and not (
        match.group(1) == recipe.cuda.version
        or match.group(1).startswith(recipe.cuda.version + ".")
    ):
        return (
            ("cuda", "version"),
            f"cuda {recipe.cuda.version} does not match the base image {image} "
            f"(CUDA {match.group(1)})",
        )
    return None


def _needs_venv(key: str) -> Problem:
    return (
        (key, "source"),
        f"{key}.source: pip installs into the recipe's venv: it needs python.source: system",
    )


def cuda_wheels_have_nvcc(recipe: Recipe) -> Problem | None:
    """PyPI's CUDA 12 nvcc wheels ship ptxas only (no nvcc, no cicc); CUDA 13's have the
    compiler, and Horovod's NCCL build compiles a .cu file."""
    cuda, hvd = recipe.cuda, recipe.horovod
    if cuda is None or cuda.source != "pip":
        return None
    if recipe.python.source != "system":
        return _needs_venv("cuda")
    if hvd is not None and hvd.gpu_operations and int(cuda.version.split(".")[0]) < 13:
        return (
            ("cuda", "version"),
            f"NVIDIA's CUDA {cuda.version} wheels have no nvcc, which Horovod's GPU build "
            "needs: use cuda 13.0 or newer with source: pip, or a CUDA base image",
        )
    return None


def mpi_wheel_needs_venv(recipe: Recipe) -> Problem | None:
    """mpi.source: pip installs the wheel into the recipe's venv."""
    mpi = recipe.mpi
    if mpi is None or mpi.source != "pip" or recipe.python.source == "system":
        return None
    return _needs_venv("mpi")


def nccl_source_matches_cuda(recipe: Recipe) -> Problem | None:
    """NCCL's apt packages come from NVIDIA's repository inside CUDA images; with the toolkit
    from wheels, NCCL comes from its wheel too."""
    if recipe.nccl is None or recipe.cuda is None:
        return None
    if recipe.nccl.source == "apt" and recipe.cuda.source == "pip":
        return (
            ("nccl", "source"),
            "nccl from apt needs NVIDIA's apt repository of a CUDA base image: with "
            "cuda.source: pip set nccl.source: pip",
        )
    if recipe.nccl.source == "pip" and recipe.python.source != "system":
        return _needs_venv("nccl")
    return None


def gpu_build_needs_devel_image(recipe: Recipe) -> Problem | None:
    hvd = recipe.horovod
    if hvd is None or hvd.gpu_operations is None or recipe.cuda is None:
        return None
    image = recipe.base.image
    if "nvidia/cuda:" in image and "-devel-" not in image:
        return (
            ("base", "image"),
            f"horovod with GPU operations compiles CUDA code: {image} is not a -devel- image",
        )
    return None


def gpu_parts_need_cuda(recipe: Recipe) -> Problem | None:
    if recipe.cuda is not None:
        return None
    if recipe.nccl is not None:
        return (("nccl",), "NCCL needs CUDA: add a cuda section (and a CUDA base image)")
    hvd = recipe.horovod
    if hvd is not None and hvd.gpu_operations is not None:
        return (
            ("horovod", "gpu_operations"),
            "GPU operations need CUDA: add a cuda section or remove horovod.gpu_operations",
        )
    torch = recipe.pytorch
    if torch is not None and torch.cuda_tag and torch.cuda_tag.startswith("cu"):
        return (
            ("pytorch", "cuda_tag"),
            f"cuda_tag {torch.cuda_tag} on an image without CUDA: use cuda_tag: cpu or add a "
            "cuda section",
        )
    return None


def cuda_tag_matches_cuda(recipe: Recipe) -> Problem | None:
    """torch cuXY wheels bundle CUDA X.Y; Horovod is built against the image's CUDA."""
    torch = recipe.pytorch
    if recipe.cuda is None or torch is None or torch.source != "pip":
        return None
    hvd = recipe.horovod
    gpu_ops = hvd is not None and hvd.gpu_operations is not None
    if torch.cuda_tag in (None, "cpu"):
        if gpu_ops:
            return (
                ("pytorch", "cuda_tag"),
                "horovod GPU operations need a CUDA build of torch: set pytorch.cuda_tag "
                f"to a cu{recipe.cuda.version.split('.')[0]}x tag",
            )
        return None
    match = re.match(r"^cu(\d+)(\d)$", torch.cuda_tag)
    if match is None:
        return None
    tag_major = match.group(1)
    cuda_major = recipe.cuda.version.split(".")[0]
    if tag_major != cuda_major:
        return (
            ("pytorch", "cuda_tag"),
            f"{torch.cuda_tag} wheels bundle CUDA {tag_major}.{match.group(2)} but the image has "
            f"CUDA {recipe.cuda.version}: use a cu{cuda_major}x tag",
        )
    return None


def nccl_link_needs_nccl_operations(recipe: Recipe) -> Problem | None:
    hvd = recipe.horovod
    if hvd is not None and hvd.nccl_link is not None and hvd.gpu_operations != "nccl":
        return (
            ("horovod", "nccl_link"),
            "nccl_link only applies with horovod.gpu_operations: nccl",
        )
    return None


def horovod_frameworks_present(recipe: Recipe) -> Problem | None:
    hvd = recipe.horovod
    if hvd is None:
        return None
    for framework in hvd.frameworks:
        section = "tensorflow" if framework == "keras" else framework
        if getattr(recipe, section) is None:
            why = " (Horovod's keras support is tf.keras)" if framework == "keras" else ""
            return (
                ("horovod", "frameworks"),
                f"horovod framework {framework} needs a {section} section in the recipe{why}",
            )
    return None


def horovod_mpi_needs_mpi(recipe: Recipe) -> Problem | None:
    hvd = recipe.horovod
    if hvd is None or recipe.mpi is not None:
        return None
    if "mpi" in hvd.controllers:
        return (("horovod", "controllers"), "the mpi controller needs an mpi section")
    if hvd.gpu_operations == "mpi":
        return (("horovod", "gpu_operations"), "gpu_operations: mpi needs an mpi section")
    return None


def lightning_needs_torch(recipe: Recipe) -> Problem | None:
    lit = recipe.lightning
    if lit is None:
        return None
    if recipe.pytorch is None:
        return (("lightning",), "lightning needs a pytorch section")
    minimum = LIGHTNING_MIN_TORCH.get(_line(lit.version))
    torch = _v(recipe.pytorch.version.split("+")[0])
    if minimum is not None and torch is not None and torch < Version(minimum):
        return (
            ("lightning", "version"),
            f"lightning {lit.version} needs torch >= {minimum}, the recipe has "
            f"{recipe.pytorch.version}",
        )
    return None


def system_python_of_distribution(recipe: Recipe) -> Problem | None:
    """`python.source: system` installs python3.X from the distribution: it must have it."""
    if recipe.python.source != "system":
        return None
    image = recipe.base.image
    suite = recipe.base.debootstrap_suite
    key = f"debian:{suite}" if suite else None
    match = re.search(r"ubuntu:?(\d\d\.\d\d)$", image)
    if match:
        key = f"ubuntu:{match.group(1)}"
    elif key is None and re.match(r"^(?:docker\.io/)?(?:library/)?debian:(\w+)", image):
        key = "debian:" + image.split("debian:")[1].split("-")[0]
    pythons = DISTRIBUTION_PYTHONS.get(key or "")
    if pythons is None or recipe.python.version in pythons:
        return None
    return (
        ("python", "version"),
        f"{key} has no python{recipe.python.version} package "
        f"(allowed: {', '.join(pythons)}): change python.version or the base image",
    )


RULES: list[Rule] = [
    system_python_of_distribution,
    cuda_comes_from_base_image,
    gpu_parts_need_cuda,
    gpu_build_needs_devel_image,
    no_wheels_on_ppc64le,
    tensorflow_python_wheels,
    tensorflow_cuda_major,
    tensorflow_gpu_package_retired,
    pytorch_python_wheels,
    pytorch_cuda_tag_published,
    pytorch_companions_match,
    pypi_torch_cuda_build,
    gpu_build_names_its_gpus,
    cuda_tag_matches_cuda,
    lightning_needs_torch,
    horovod_frameworks_present,
    horovod_mpi_needs_mpi,
    distribution_mpi_pmi,
    nccl_link_needs_nccl_operations,
    horovod_cxx_patch,
    cuda_wheels_have_nvcc,
    nccl_source_matches_cuda,
    mpi_wheel_needs_venv,
]


def problems(recipe: Recipe) -> list[Problem]:
    """Every rule's complaint about the recipe, in rule order."""
    return [p for p in (rule(recipe) for rule in RULES) if p is not None]


def check_compatibility(recipe: Recipe, doc: yamlconf.Document) -> None:
    """Raise every failing rule at once, each a line pointing at the key that set it."""
    lines = [
        f"{doc.where(path)}: {'.'.join(path)}: {message}" for path, message in problems(recipe)
    ]
    raise_problems(sort_by_line(lines))
