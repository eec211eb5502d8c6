"""Checks before a real launch: the image exists, its build facts fit the launch, and the
cluster's srun offers the MPI plugin.

Build facts are the `org.hvd-container.*` labels `hvd-container build` records after verifying
the image; they are read from a SIF's labels (the SIF reader), from an image directory's
/.singularity.d/labels.json, or from a local Docker image's labels. The checks on them (PMI
mismatch, missing MPI controller, arch) live in launcher.pitfalls and run during composition;
this module supplies the facts and the checks that need the real machine.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from hvd_container.launcher.facts import ImageFacts
from hvd_container.launcher.runtimes import is_file_ref

from hvd_container.core.errors import UserError
from hvd_container.core.files import user_path

if TYPE_CHECKING:
    from hvd_container.launcher.request import LaunchRequest

PREFIX = "org.hvd-container."


def _split(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(v.strip().lower() for v in value.split(",") if v.strip())


def facts_from_labels(
    labels: dict[str, str], source: str, arch: str | None = None
) -> ImageFacts | None:
    """ImageFacts from build-fact labels (with or without the prefix); None if there are none."""
    facts = {k[len(PREFIX) :] if k.startswith(PREFIX) else k: v for k, v in labels.items()}
    if not any(k.startswith(("recipe.", "horovod.", "versions.", "arch", "mpi.")) for k in facts):
        return None
    name = facts.get("recipe.name")
    mpi_pmi = _split(facts.get("mpi.pmi"))
    recipe_facts = None
    if name and mpi_pmi is None and _is_builtin_recipe(name):
        # The PMI flavour is a recipe fact; a built-in recipe of that name still knows it.
        # Only a built-in name: a label is the image's word, never a path to follow.
        try:
            from hvd_container.launcher.facts import facts_from_recipe

            from hvd_container import recipes

            # the shipped file itself: a file of that name in the working directory is not it
            recipe_facts = facts_from_recipe(str(recipes.path() / f"{name}.yaml"))
        except UserError:
            recipe_facts = None
        if recipe_facts is not None and recipe_facts.name == name:
            mpi_pmi = recipe_facts.mpi_pmi
    if mpi_pmi is None and "versions.mpi" in facts and not facts["versions.mpi"]:
        mpi_pmi = ()
    mpi_family = facts.get("mpi.family")
    if mpi_family is None and recipe_facts is not None:
        mpi_family = recipe_facts.mpi_family
    gpu = None
    if "versions.cuda" in facts:
        gpu = bool(facts["versions.cuda"])
    elif recipe_facts is not None:
        gpu = recipe_facts.gpu
    lightning = horovod = None
    if "versions.python" in facts:
        # verification's probe ran: a package it did not report is not installed
        lightning = bool(facts.get("versions.lightning"))
        horovod = bool(facts.get("versions.horovod")) or "horovod.controllers" in facts
    elif recipe_facts is not None:
        lightning, horovod = recipe_facts.lightning, recipe_facts.horovod
    return ImageFacts(
        source=source,
        name=name,
        version=facts.get("recipe.version") or (recipe_facts.version if recipe_facts else None),
        arch=facts.get("arch") or arch,
        mpi_pmi=mpi_pmi,
        controllers=_split(facts.get("horovod.controllers")),
        tensor_ops=_split(facts.get("horovod.tensor_ops")),
        glibc=facts.get("versions.glibc") or None,
        gpu=gpu,
        mpi_family=mpi_family,
        cuda=facts.get("versions.cuda", recipe_facts.cuda if recipe_facts else None),
        lightning=lightning,
        horovod=horovod,
    )


def _is_builtin_recipe(name: str) -> bool:
    from hvd_container.containers.recipe import list_builtin

    return name in list_builtin()


def _docker_labels(ref: str) -> dict[str, str] | None:
    """The labels of a local Docker image, or None (no SDK, no engine, no such image)."""
    try:
        # the SDK is imported only when the image is a Docker reference
        from hvd_container.containers.engine.docker_api import DockerEngine, docker_client

        info = DockerEngine(docker_client(timeout=5)).inspect(ref)
    except Exception:  # no SDK, no engine: no facts, no checks
        return None
    if info is None:
        return None
    return dict((info.get("Config") or {}).get("Labels") or {})


def image_facts(image: str, *, ask_docker: bool = True) -> ImageFacts | None:
    """The build facts of a SIF file, an image directory or (`ask_docker`) a local Docker image.

    Files are read here and now; asking the Docker engine imports its SDK and may wait for a
    daemon, so a dry run (which must stay fast and work anywhere) does not.
    """
    path = user_path(image)
    if path.is_dir():
        labels_file = path / ".singularity.d" / "labels.json"
        if labels_file.is_file():
            try:
                labels = json.loads(labels_file.read_text())
            except (OSError, ValueError, RecursionError):  # ValueError: bad JSON or UTF-8
                return None
            if not isinstance(labels, dict):
                return None
            return facts_from_labels(
                {str(k): v for k, v in labels.items() if isinstance(v, str)}, f"image {image}"
            )
        return None
    if path.is_file():
        from hvd_container.containers.sif.format import has_sif_magic

        try:
            sif = has_sif_magic(path)
        except OSError as exc:
            raise UserError(f"image {image}: cannot read it ({exc.strerror})") from None
        if not sif:
            return None
        from hvd_container.containers.sif.reader import read_sif

        info = read_sif(path)
        arch = info.arch if info.arch != "unknown" else None
        found = facts_from_labels(info.labels, f"image {image}", arch)
        if found is None and arch is not None:
            # a SIF made elsewhere, without our labels: its descriptor still tells the arch
            return ImageFacts(source=f"image {image}", arch=arch)
        return found
    if is_file_ref(image) or not ask_docker:
        return None
    labels = _docker_labels(image)
    return facts_from_labels(labels, f"image {image}") if labels else None


def missing_image(image: str | None, runtime_kind: str, origin: str = "--image") -> str | None:
    """Why a file or directory image cannot be run (it does not exist), or None.

    `origin` says where the name came from, e.g. "--image" or "site local's images.template".
    """
    if not image or runtime_kind in ("shifter", "podman-hpc", "pyxis", "none"):
        return None
    if (is_file_ref(image) or runtime_kind == "charliecloud") and not user_path(image).exists():
        return (
            f"{origin} {image}: no such file or directory (make it with `hvd-container build` "
            "then `hvd-container convert --to sif`)"
        )
    return None


def require_image_file(image: str | None, runtime_kind: str, origin: str = "--image") -> None:
    """A file or directory image must exist before anything is queued."""
    problem = missing_image(image, runtime_kind, origin)
    if problem:
        raise UserError(problem)


def parse_mpi_list(text: str) -> list[str]:
    """Plugin names from `srun --mpi=list` (indented names, then "versions available: a,b")."""
    plugins: list[str] = []
    for line in text.splitlines():
        match = re.search(r"versions available:\s*(.+)$", line)
        if match:
            plugins += [p.strip() for p in match.group(1).split(",") if p.strip()]
        elif line.startswith(("\t", " ")) and line.strip():
            plugins.append(line.strip().removeprefix("srun: ").split()[0])
        elif line.startswith("srun: ") and "MPI" not in line and line[6:].strip():
            plugins.append(line[6:].split()[0])  # older Slurm: "srun: pmix"
    return list(dict.fromkeys(plugins))


def srun_mpi_plugins() -> list[str] | None:
    """What `srun --mpi=list` offers here (None when srun is not installed)."""
    import shutil  # here, not at the top: a dry run imports this module and runs nothing
    import subprocess

    if shutil.which("srun") is None:
        return None
    proc = subprocess.run(["srun", "--mpi=list"], capture_output=True, text=True)
    return parse_mpi_list(proc.stdout + proc.stderr)


def check_mpi_plugin(mpi: str | None, offered: list[str] | None) -> None:
    if not mpi or offered is None or mpi in offered:
        return
    raise UserError(
        f"--mpi={mpi}: this cluster's srun does not offer it (allowed: {', '.join(offered)}); "
        "pick one the image's MPI speaks, e.g. --mpi pmix for Debian's Open MPI"
    )


def gpu_warnings(facts: ImageFacts | None, gpus_per_node: int) -> list[str]:
    if facts is not None and facts.gpu is False and gpus_per_node > 0:
        return [
            f"{facts.source} is a CPU image but the job asks for {gpus_per_node} GPUs per node: "
            "the GPUs stay idle; build a CUDA recipe"
        ]
    return []


def with_image_facts(
    request: LaunchRequest, image: str | None, *, ask_docker: bool = True
) -> LaunchRequest:
    """The request with facts from the image's labels (they win over the recipe's)."""
    if not image:
        return request
    facts = image_facts(image, ask_docker=ask_docker)
    if facts is None:
        return request
    if request.facts is not None:
        merged = {
            k: v if v is not None else getattr(request.facts, k) for k, v in facts.__dict__.items()
        }
        facts = ImageFacts(**merged)
    return replace(request, facts=facts)
