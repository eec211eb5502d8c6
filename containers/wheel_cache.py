"""Horovod's compiled wheel, shared through a registry: a build with the same inputs anywhere
pulls it instead of compiling.

The key is the digest of what the compile reads: the Dockerfile of Horovod's stages (the base,
MPI, NCCL/CUDA, the build lock, the compiler, the sdist, its patches and flags), every file
those stages copy, and the ID of the base image they start from (render.wheel_build;
build.build_digest). Under the registry the user names (`build --wheel-cache REGISTRY`, else
the `--push` registry) the wheel is the image REGISTRY/horovod-wheel:KEY, which holds only the
wheel (a few MB, FROM scratch). A build looks for it in the engine, then in the registry; with
it, the image's wheel stage starts from that image and nothing compiles. Without it, the build
makes that image here (the compile, or the engine's layer cache), starts from it the same way,
and pushes it once the image is verified. A changed input is another key; `--no-cache` looks
for nothing and compiles again (its push then replaces the registry's).

The base's ID is in the key because the compile links against what the base holds: a registry
base pinned by digest has the same ID on every machine (its config's digest), a base made here
with debootstrap has one of its own, so its wheel is shared by the builds of this machine only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from hvd_container.containers.engine import EngineError
from hvd_container.containers.push import auth_from_env, push_tagged, redact, remote_ref
from hvd_container.containers.render import build_digest, wheel_build

from hvd_container.core.errors import StepFailed

if TYPE_CHECKING:
    from hvd_container.containers.engine import Engine
    from hvd_container.containers.recipe import LockedRecipe
    from hvd_container.containers.render import DockerBuild

REPOSITORY = "horovod-wheel"  # under the registry (and namespace) the user names
FLAG = "--wheel-cache"

Source = Literal["engine", "pulled", "built"]
Report = Callable[[str], None]


@dataclass(frozen=True)
class Wheel:
    """The image that holds the recipe's compiled wheel, by its name in the engine, and where
    it came from: the engine had it, the registry had it, or this build made it."""

    repository: str
    key: str
    source: Source
    pushed: str | None = None  # the digest the registry serves, once pushed

    @property
    def image(self) -> str:
        return f"{self.repository}:{self.key}"


def wheel_repository(registry: str, flag: str = FLAG) -> str:
    """REGISTRY/horovod-wheel, the registry checked as a push target is."""
    return remote_ref(f"{REPOSITORY}:latest", registry, flag)[0]


def provide(
    engine: Engine,
    recipe: LockedRecipe,
    registry: str,
    base_id: str | None,
    build: Callable[[DockerBuild, str], str],
    report: Report,
    *,
    fresh: bool = False,
) -> Wheel | None:
    """The wheel image of recipe's inputs, found (the engine, then the registry) or built here
    through build(context, tag); None for a recipe that compiles no Horovod. fresh: look for
    nothing (--no-cache)."""
    stages = wheel_build(recipe)
    if stages is None:
        return None
    repository = wheel_repository(registry)
    key = build_digest(stages.context, base_id)
    image = f"{repository}:{key}"
    if not fresh:
        if engine.inspect(image) is not None:
            report(f"Horovod's wheel: {image} is in the engine already; nothing compiles")
            return Wheel(repository, key, "engine")
        if _pulled(engine, repository, key, report):
            report(
                f"Horovod's wheel: pulled {image} (built from the same inputs); nothing compiles"
            )
            return Wheel(repository, key, "pulled")
    why = "--no-cache" if fresh else "not in the registry"
    report(f"Horovod's wheel: {why}; compiling it here, pushed to {repository} after the build")
    build(stages, image)
    return Wheel(repository, key, "built")


def _pulled(engine: Engine, repository: str, key: str, report: Report) -> bool:
    """Whether the registry had the wheel image (pulled into the engine now). A registry that
    fails otherwise is reported and the build goes on without it: the wheel compiles here."""
    auth = auth_from_env()
    try:
        return engine.pull(repository, key, auth)
    except EngineError as exc:
        reason = redact(" ".join(str(exc).split()), auth)
        report(f"Horovod's wheel: cannot pull {repository}:{key} ({reason})")
        return False


def share(engine: Engine, wheel: Wheel, report: Report) -> Wheel:
    """Push a wheel image this build made; a refused push is reported, not fatal (the image is
    built and verified; the next build elsewhere compiles again)."""
    if wheel.source != "built":
        return wheel
    try:
        pushed = push_tagged(engine, wheel.repository, wheel.key, auth_from_env(), lambda _: None)
    except StepFailed as exc:
        report(f"Horovod's wheel was not shared: {exc}")
        return wheel
    report(f"Horovod's wheel: pushed {pushed.remote} ({pushed.digest})")
    return Wheel(wheel.repository, wheel.key, wheel.source, pushed.digest)
