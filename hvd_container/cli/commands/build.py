"""CLI commands: `build RECIPE`, `verify IMAGE`, `push RECIPE|IMAGE --registry R`."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from hvd_container.cli.commands.common import ArchOpt, RecipeArg
from hvd_container.cli.completion import complete_recipe
from hvd_container.cli.progress import JsonReporter, make_reporter, reported
from hvd_container.cli.terminal import safe_text
from hvd_container.containers import referrers, signing
from hvd_container.containers.build import BuildOptions, build_recipe
from hvd_container.containers.engine import Engine, engine_errors, open_engine
from hvd_container.containers.multi_arch import build_each, push_each
from hvd_container.containers.push import auth_from_env, remote_ref, split_tag
from hvd_container.containers.recipe import LockedRecipe, MultiArch
from hvd_container.containers.recipe_loader import list_builtin, load_images
from hvd_container.containers.verify import verify_existing
from hvd_container.containers.wheel_cache import wheel_repository
from hvd_container.core.errors import StepFailed, UserError


class Progress(str, Enum):
    auto = "auto"
    rich = "rich"
    plain = "plain"
    json = "json"


JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON lines.")]


class EngineName(str, Enum):
    auto = "auto"
    docker = "docker"
    podman = "podman"
    podman_hpc = "podman-hpc"


EngineOpt = Annotated[
    EngineName | None,
    typer.Option(
        "--engine",
        help="The container engine: docker, podman (rootless, through its API service), "
        "podman-hpc (NERSC's: its store, built images migrated to the squashed store that "
        "`podman-hpc run` reads) or auto (Docker where it answers, else podman). Default: "
        "$HVD_ENGINE, else auto.",
    ),
]


SignOpt = Annotated[
    Path | None,
    typer.Option(
        "--sign",
        metavar="KEY",
        help="Sign what is pushed by its digest with this ECDSA P-256 private key file (PEM; an "
        "encrypted one's password in $COSIGN_PASSWORD), stored beside it as cosign stores "
        "signatures: `sign IMAGE --key KEY` after the push.",
    ),
]


def _engine_name(engine: EngineName | None) -> str | None:
    return engine.value if engine is not None else None


def build_cmd(
    recipe: RecipeArg,
    progress: Annotated[
        Progress,
        typer.Option("--progress", help="auto: rich on a terminal, plain lines otherwise."),
    ] = Progress.auto,
    json_output: JsonOpt = False,
    push: Annotated[
        str | None,
        typer.Option(
            "--push",
            metavar="REGISTRY",
            help="Push the verified image to REGISTRY (credentials as for `push`).",
        ),
    ] = None,
    no_cache: Annotated[
        bool,
        typer.Option("--no-cache", help="Rebuild every layer, even if the image is up to date."),
    ] = False,
    no_verify: Annotated[
        bool, typer.Option("--no-verify", help="Skip verification (image is not marked verified).")
    ] = False,
    no_host_pip: Annotated[
        bool,
        typer.Option(
            "--no-host-pip", help="Do not serve the host's pip configuration to the build."
        ),
    ] = False,
    wheel_cache: Annotated[
        str | None,
        typer.Option(
            "--wheel-cache",
            metavar="REGISTRY",
            help="Where Horovod's compiled wheel is shared: pulled from "
            "REGISTRY/horovod-wheel:<digest of its inputs> instead of compiling, pushed there "
            "after a build that compiled it. Default: the --push registry.",
        ),
    ] = None,
    sign: SignOpt = None,
    engine_name: EngineOpt = None,
    arch: ArchOpt = None,
) -> None:
    """Build the recipe's image through a container engine, verify it, label it (and push it).

    A recipe that names several architectures (or --arch given more than once) makes an image
    for each, NAME:VERSION-ARCH; with --push they go under one OCI image index NAME:VERSION."""

    # Made first, so that every failure (recipe, engine, build, push) reaches reporter.failure:
    # in JSON mode each one ends the stream with an error record.
    reporter = make_reporter(progress.value, json_output)
    phase: str | None = None  # None: the phase of the last progress event
    with reported(reporter, lambda: phase), engine_errors():
        loaded = load_images(recipe, arch or ())
        if sign is not None and push is None:
            raise UserError("--sign signs what is pushed: give --push REGISTRY too")
        if push is not None:
            # A bad --push, half-set credentials or a key that cannot sign fail now, not
            # after the build.
            remote_ref(_tag_of(loaded), push, "--push")
            auth_from_env()
            if sign is not None:
                signing.image_key(sign)
        if wheel_cache is not None:
            wheel_repository(wheel_cache, "--wheel-cache")
            auth_from_env()
        options = BuildOptions(
            no_cache=no_cache,
            verify=not no_verify,
            use_host_pip=not no_host_pip,
            wheel_cache=wheel_cache if wheel_cache is not None else push,
        )
        # one engine for the command: the build, its verification and the push
        engine = open_engine(_engine_name(engine_name), nocache=no_cache)
        if isinstance(loaded, MultiArch):
            results = build_each(loaded, reporter, options, engine)
        else:
            results = [build_recipe(loaded, reporter, options, engine=engine)]
        pushed: list[dict[str, Any] | None] = [None] * len(results)
        index = None
        if push is not None:
            phase = "push"
            if isinstance(loaded, MultiArch):
                done = _push_set(loaded, push, reporter, engine)
                pushed = [_pushed(result) for _arch, result in done.images]
                index = _pushed(done.index)
            else:
                pushed = [_push(results[0].tag, push, reporter, engine)]
            if sign is not None:
                phase = "sign"
                _sign_pushed([*pushed, *([index] if index else [])], sign, reporter)
    if json_output or progress is Progress.json:
        for number, result in enumerate(results, 1):
            summary: dict[str, Any] = {
                "event": "result",
                "tag": result.tag,
                "image_id": result.image_id,
                "cached": result.cached,
                "seconds": round(result.seconds, 1),
                "labels": result.labels,
            }
            if isinstance(loaded, MultiArch):
                summary["arch"] = loaded.images[number - 1].arch
            if pushed[number - 1]:
                summary["pushed"] = pushed[number - 1]
            if result.wheel is not None:
                summary["horovod_wheel"] = {
                    "image": result.wheel.image,
                    "source": result.wheel.source,
                    "pushed": result.wheel.pushed,
                }
            if index and number == len(results):
                summary["index"] = index
            typer.echo(json.dumps(summary))


def _tag_of(loaded: LockedRecipe | MultiArch) -> str:
    return loaded.index_tag if isinstance(loaded, MultiArch) else loaded.image_tag


def _pushed(result: Any) -> dict[str, Any]:
    return {"remote": result.remote, "digest": result.digest}


def _sign_pushed(pushed: list[dict[str, Any] | None], key: Path, reporter: Any) -> None:
    """--sign: each pushed image (and index) signed by the digest the registry gave back; the
    tag of its signatures recorded beside it."""
    for record in (r for r in pushed if r):
        repository, _tag = split_tag(record["remote"])
        signed = signing.sign_image(f"{repository}@{record['digest']}", key)
        record["signature"] = signed.tag
        reporter("done", "sign", f"signed {signed.image} with key {signed.key} ({signed.tag})")


def _push_set(images: MultiArch, registry: str, reporter: Any, engine: Engine | None) -> Any:
    """Each image, then the index over them, with their progress shown."""
    done = push_each(
        images, registry, engine, lambda m: reporter("info", "push", m), reporter.transfer
    )
    for arch, result in done.images:
        reporter("done", "push", f"pushed {result.remote} ({arch}, {result.digest})")
    reporter("done", "push", f"pushed the image index {done.index.remote} ({done.index.digest})")
    return done


def push_with_progress(
    image: str, registry: str, reporter: Any, engine: Engine | None = None
) -> Any:
    """The image pushed with its bill of materials beside it, its notes and layer bytes shown
    by reporter."""

    # push_image checks --registry before it connects to the engine (opened here if None)
    return referrers.push_with_materials(
        engine,
        image,
        registry,
        lambda m: reporter("info", "push", m),
        on_transfer=reporter.transfer,
    )


def _push(image: str, registry: str, reporter: Any, engine: Engine | None = None) -> dict[str, Any]:
    result = push_with_progress(image, registry, reporter, engine)
    reporter("done", "push", f"pushed {result.remote} ({result.digest})")
    return {"remote": result.remote, "digest": result.digest}


def verify_cmd(
    image: Annotated[str, typer.Argument(metavar="IMAGE", help="Local image name or id.")],
    recipe: Annotated[
        str | None,
        typer.Option(
            "--recipe",
            autocompletion=complete_recipe,
            help="Compare with this recipe (default: the built-in one named in its labels, "
            "else the facts its labels record).",
        ),
    ] = None,
    json_output: JsonOpt = False,
    engine_name: EngineOpt = None,
) -> None:
    """Re-run the checks on an image (check-build, hvd.init per framework, recipe checks)."""

    try:
        with engine_errors():
            _verify(open_engine(_engine_name(engine_name)), image, recipe, json_output)
    except (UserError, KeyboardInterrupt) as exc:
        if json_output:
            JsonReporter().failure(exc, "verify")
        raise


def _verify(engine: Engine, image: str, recipe: str | None, json_output: bool) -> None:

    quiet = json_output
    done = verify_existing(
        engine,
        image,
        recipe,
        on_step=None if quiet else lambda m: typer.echo(safe_text(f"[checks] => {m}")),
        on_note=None if quiet else lambda m: typer.echo(safe_text(m)),
    )
    result = done.result
    if json_output:
        typer.echo(
            json.dumps(
                {
                    "event": "result",
                    "image": image,
                    "ok": result.ok,
                    "against": done.against,
                    "problems": result.problems,
                    "facts": done.labels,
                    **({"warnings": result.warnings} if result.warnings else {}),
                }
            )
        )
    else:
        for key, value in done.labels.items():
            typer.echo(safe_text(f"  {key}={value}"))  # what the image said
    if not result.ok:
        raise StepFailed(f"verification of {image} failed: {'; '.join(result.problems)}")
    if not json_output:
        typer.echo(f"{image}: verified against {done.against}")


def push_cmd(
    target: Annotated[
        str,
        typer.Argument(
            metavar="RECIPE|IMAGE",
            help="A recipe (its tag) or a local image.",
            autocompletion=complete_recipe,
        ),
    ],
    registry: Annotated[
        str, typer.Option("--registry", "-r", metavar="HOST[:PORT][/NS]", help="Target registry.")
    ],
    progress: Annotated[
        Progress,
        typer.Option(
            "--progress", help="auto: a bar a layer on a terminal, plain lines otherwise."
        ),
    ] = Progress.auto,
    json_output: JsonOpt = False,
    sign: SignOpt = None,
    engine_name: EngineOpt = None,
) -> None:
    """Push a built image to a registry and read its digest back from the registry.

    Credentials: $HVD_REGISTRY_USERNAME and $HVD_REGISTRY_PASSWORD if both are set, else the Docker config ($DOCKER_CONFIG or ~/.docker/config.json, as `docker login` writes it).

    They go only to the engine and are never printed.
    """

    reporter = make_reporter(progress.value, json_output, starting="starting push")
    with reported(reporter, "push"), engine_errors():
        image = _image_of(target)
        if sign is not None:
            signing.image_key(sign)  # a key that cannot sign fails before the push
        if isinstance(image, MultiArch):
            remote_ref(image.index_tag, registry, "--registry")
            done = _push_set(image, registry, reporter, open_engine(_engine_name(engine_name)))
            result = {
                **_pushed(done.index),
                "images": [{"arch": a, **_pushed(r)} for a, r in done.images],
            }
        else:
            remote_ref(image, registry, "--registry")  # a bad registry before the engine
            result = _push(image, registry, reporter, open_engine(_engine_name(engine_name)))
        if sign is not None:
            _sign_pushed([result, *result.get("images", [])], sign, reporter)
    if json_output or progress is Progress.json:
        typer.echo(json.dumps({"event": "result", **result}))


def _image_of(target: str) -> str | MultiArch:
    """A recipe path or built-in recipe name means its image tag (its images, where it makes
    several); anything else is an image."""

    if target.endswith((".yaml", ".yml")) or Path(target).is_file() or target in list_builtin():
        images = load_images(target)
        return images if isinstance(images, MultiArch) else images.image_tag
    return target


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command("build")(build_cmd)
    app.command("verify")(verify_cmd)
    app.command("push")(push_cmd)
