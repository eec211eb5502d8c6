"""CLI command: inspect (a SIF's descriptors, arch, labels and build facts; the bill of
materials of a SIF or an image, and what changed between two)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hvd_container.cli.commands.common import JsonOpt
from hvd_container.cli.completion import complete_image
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.cli.terminal import safe_text
from hvd_container.containers import materials, referrers, signing
from hvd_container.containers.engine import engine_errors, open_engine
from hvd_container.containers.sif.reader import read_sif
from hvd_container.core.errors import UserError
from hvd_container.facts import PREFIX

if TYPE_CHECKING:
    from hvd_container.containers.engine import Engine


def inspect(
    target: Annotated[
        str,
        typer.Argument(
            help="A .sif file; with --sbom or --diff also an image in the engine, or one in a "
            "registry (REGISTRY/NAME:TAG or @DIGEST: the bill of materials beside it).",
            autocompletion=complete_image,
        ),
    ],
    sbom: Annotated[
        bool,
        typer.Option("--sbom", help="Print its bill of materials (with --json: the document)."),
    ] = False,
    against: Annotated[
        str | None,
        typer.Option(
            "--diff",
            metavar="OTHER",
            help="What changed from TARGET to OTHER (a SIF or an image): packages added, "
            "removed, at another version.",
        ),
    ] = None,
    signatures: Annotated[
        bool,
        typer.Option(
            "--signatures",
            help="A SIF's signatures per object group, or those beside a pushed image (cosign's "
            "format); with --keyring, checked (exit 1 when a group or the image is unsigned or "
            "a signature does not hold).",
        ),
    ] = False,
    keyring: Annotated[
        list[Path] | None,
        typer.Option(
            "--keyring",
            metavar="FILE",
            help="With --signatures: the public keys you trust, repeat for several: OpenPGP "
            "keys (armored or binary) for a SIF, PEM keys (cosign.pub) for an image. Only "
            "these are asked, not your own keyring.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a SIF's facts, or the bill of materials of a SIF or an image and what changed.

    Without options: a SIF's descriptors, arch, labels and build facts (no Apptainer needed).
    --sbom: the bill of materials of a SIF or an image; --diff OTHER: what changed between
    two; --signatures [--keyring FILE]: a SIF's or a pushed image's signatures, checked
    against the keys."""
    if keyring and not signatures:
        raise UserError("--keyring goes with --signatures (the keys to check them against)")
    if signatures:
        with json_errors(as_json):
            if signing.is_image_target(target):
                _image_signatures(target, keyring or [], as_json)
            else:
                _signatures(Path(target), keyring or [], as_json)
        return
    if sbom or against is not None:
        with json_errors(as_json), engine_errors():
            _materials(target, against, as_json)
        return
    with json_errors(as_json):
        info = read_sif(Path(target))
    if as_json:  # emit writes ASCII: control characters and surrogates are escaped
        emit(info.as_dict())
        return

    def show(line: str) -> None:
        typer.echo(safe_text(line))  # labels and names come from whoever made the file

    show(f"file:   {info.path}")
    show(f"arch:   {info.arch}")
    show(f"id:     {info.uuid}")
    show(f"rootfs: offset {info.rootfs_offset}, {info.rootfs_size} bytes")
    show("descriptors:")
    for d in info.descriptors:
        name = f"  {d.name}" if d.name else ""
        show(
            f"  {d.id:<3} group {d.group or '-':<3} {d.offset:>12}-{d.offset + d.size:<12} "
            f"{d.describe()}{name}"
        )
    facts = info.build_facts
    if facts:
        show("build facts:")
        for key, value in facts.items():
            show(f"  {key}: {value}")
    others = {k: v for k, v in info.labels.items() if not k.startswith(PREFIX)}
    if others:
        show("labels:")
        for key, value in sorted(others.items()):
            show(f"  {key}: {value}")


def _materials(target: str, against: str | None, as_json: bool) -> None:
    """--sbom and --diff: the parts of one bill of materials, or the changes between two."""
    engines: list[Engine] = []

    def engine() -> Engine:  # opened once, and only for an image
        if not engines:
            engines.append(open_engine())
        return engines[0]

    first = materials.read(target, engine, referrers.materials_at)
    if against is None:
        if as_json:
            emit({"source": first.source, "bom": first.document})
            return
        typer.echo(safe_text(f"{first.source}: {len(first.parts)} parts"))
        for part in first.parts:
            typer.echo(safe_text(f"  {part.kind:<9} {part.name:<40} {part.version}"))
        return
    second = materials.read(against, engine, referrers.materials_at)
    changes = materials.diff(first, second)
    if as_json:
        emit({"from": first.source, "to": second.source, "changes": [asdict(c) for c in changes]})
        return
    typer.echo(safe_text(f"{first.source} -> {second.source}: {len(changes)} changes"))
    for c in changes:
        mark = "+" if c.before is None else "-" if c.after is None else "~"
        versions = (
            c.after
            if c.before is None
            else c.before
            if c.after is None
            else f"{c.before} -> {c.after}"
        )
        typer.echo(safe_text(f"  {mark} {c.kind:<9} {c.name:<40} {versions}"))


def _signatures(path: Path, keyring: list[Path], as_json: bool) -> None:
    """--signatures: who signed each object group; with keys, whether each holds."""
    groups = signing.report_sif(path, keyring)
    refused = [f"{path}: group {g.group}: {p}" for g in groups if g.verified is False
               for p in g.problems]  # fmt: skip
    if refused:  # the error record (--json) or the one-line errors say it
        raise signing.Refused(refused)
    if as_json:
        emit({"path": str(path), "checked": bool(keyring), "groups": [asdict(g) for g in groups]})
        return
    for g in groups:
        signers = ", ".join(g.fingerprints) or "nobody"
        verdict = "verified" if g.verified else "not checked"
        typer.echo(safe_text(f"{path}: group {g.group}: signed by {signers}: {verdict}"))
    if not keyring:
        typer.echo("not checked: give --keyring FILE with the public keys you trust")


def _image_signatures(ref: str, keyring: list[Path], as_json: bool) -> None:
    """--signatures of a pushed image: how many are stored beside it; with keys, whose held."""
    found = signing.check_image(ref, keyring)
    if keyring and not found.ok:
        raise signing.Refused([f"{found.image}: {p}" for p in found.problems])
    if as_json:
        emit(
            {
                "image": found.image,
                "checked": bool(keyring),
                "signatures": found.found,
                "signers": found.signers,
            }
        )
        return
    if keyring:
        typer.echo(safe_text(f"{found.image}: signed by {', '.join(found.signers)}: verified"))
        return
    typer.echo(safe_text(f"{found.image}: {found.found} signature(s) beside it: not checked"))
    typer.echo("not checked: give --keyring FILE with the public keys you trust")


def register(app: typer.Typer) -> None:
    """Add `inspect` to the app."""
    app.command("inspect")(inspect)
