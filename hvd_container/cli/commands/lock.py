"""CLI command: `lock RECIPE [--check] [--json]` (a recipe's whole package set, resolved)."""

from __future__ import annotations

from typing import Annotated

import typer

from hvd_container.cli.commands.common import ArchOpt, JsonOpt, RecipeArg
from hvd_container.cli.json_output import emit
from hvd_container.cli.progress import make_reporter, reported
from hvd_container.cli.terminal import warn
from hvd_container.containers.lock import LockResult, lock_images


def lock_cmd(
    recipe: RecipeArg,
    check: Annotated[
        bool,
        typer.Option("--check", help="Only say what would change; exit 1 if the lock is stale."),
    ] = False,
    upgrade: Annotated[
        bool,
        typer.Option(
            "--upgrade",
            help="Resolve again even when the lock is current (newer releases, a moved base tag).",
        ),
    ] = False,
    json_output: JsonOpt = False,
    arch: ArchOpt = None,
) -> None:
    """Resolve the recipe's Python packages with hashes and write NAME.lock.

    A recipe that names several architectures (or --arch) has a lock an image, NAME.ARCH.lock.

    They are resolved for the recipe's image (Python, platform, arch, indexes), and the known
    incompatibilities are checked on the resolved set. A lock made for the recipe as it is now is current and comes back at once."""
    reporter = make_reporter("auto", json_output)
    with reported(reporter, "lock"):
        results = lock_images(
            recipe,
            arch or (),
            check=check,
            upgrade=upgrade,
            on_step=lambda message: reporter("step", "lock", message),
        )
    stale = False
    for result in results:
        stale = _show(recipe, result, check, json_output) or stale
    if stale:
        raise typer.Exit(1)


def _show(recipe: str, result: LockResult, check: bool, json_output: bool) -> bool:
    """Say what one lock became; True where --check finds it stale."""
    stale = check and bool(result.changes)
    base = result.base
    if json_output:
        record = {
            "recipe": recipe,
            **({"arch": result.arch} if result.arch else {}),
            "path": str(result.path),
            "written": result.written,
            "up_to_date": not result.changes,
            "changes": result.changes,
            "packages": {p.name: p.version for p in result.packages.values()},
            "seconds": round(result.seconds, 2),
        }
        if base is not None:
            record["base"] = {"image": base.image, "digest": base.digest, "reason": base.reason}
        emit(record)
    else:
        if base is not None and base.digest is None:
            warn([f"base {base.image} not pinned: {base.reason}"])
        for change in result.changes:
            typer.echo(f"  {change}")
        if check:
            state = "is stale" if stale else "is up to date"
            typer.echo(f"{result.path} {state} ({len(result.packages)} packages)")
        else:
            done = "wrote" if result.written else "unchanged:"
            typer.echo(
                f"{done} {result.path} ({len(result.packages)} packages, {result.seconds:.1f} s)"
            )
    return stale


def register(app: typer.Typer) -> None:
    """Add `lock` to the app."""
    app.command("lock")(lock_cmd)
