"""Which `convert` flags apply to which target and engine: refuse the ones that would be ignored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hvd_container.containers.convert.compression import check_compressor
from hvd_container.containers.convert.publisher import publishers

from hvd_container.core.errors import UserError

SUPPORTED_ARCHES = ("amd64", "arm64", "ppc64le")


def _applies() -> dict[str, tuple[tuple[str, ...], str | None]]:
    """flag -> (targets, engine or None for any) it applies to, as said in the error."""
    site_runtimes = tuple(publishers())  # containers/convert/publisher.py: Shifter, podman-hpc
    return {
        "--output": (("sif", "def"), None),
        "--engine": (("sif",), None),
        "--compression": (("sif",), "native"),
        "--threads": (("sif",), "native"),
        "--arch": (("sif",), "native"),
        "--archive": (("sif",), "apptainer"),
        "--bootstrap": (("def",), None),
        "--site": (site_runtimes, None),
        "--registry": (site_runtimes, None),
        "--login-host": (site_runtimes, None),
    }


def check_arch_flag(arch: str | None) -> str | None:
    if arch is not None and arch not in SUPPORTED_ARCHES:
        raise UserError(
            f"--arch: unknown architecture {arch!r} (allowed: {', '.join(SUPPORTED_ARCHES)})"
        )
    return arch


def check_recipe_arch(arch: str | None, recipe: Any) -> None:
    """--arch against a recipe source, before the engine is asked: the recipe's image is built
    for its `arch:`, so another --arch could only fail later as a missing or wrong image."""
    if arch is None or recipe is None or arch == recipe.arch:
        return
    raise UserError(
        f"--arch {arch}: recipe {recipe.name!r} has arch: {recipe.arch}, its image "
        f"{recipe.image_tag} is built for {recipe.arch} (allowed here: {recipe.arch}; for "
        f"{arch} set arch: {arch} in a copy of the recipe and build it)"
    )


def check_flags(to: str, engine: str, given: Mapping[str, object]) -> None:
    """UserError for the first flag in given (flag -> value, None when not given) that the
    target/engine would silently ignore; then the values of the flags that do apply."""
    for flag, value in given.items():
        if value is None:
            continue
        targets, needs_engine = _applies()[flag]
        if to in targets and (needs_engine is None or engine == needs_engine):
            continue
        where = " or ".join(f"--to {t}" for t in targets)
        if needs_engine:
            where += f" --engine {needs_engine}"
        used = f"--to {to}" + (f" --engine {engine}" if to == "sif" else "")
        raise UserError(f"{flag}: not used with {used} (only with {where})")
    if given.get("--compression") is not None:
        check_compressor(str(given["--compression"]))
    check_arch_flag(given.get("--arch"))  # type: ignore[arg-type]
