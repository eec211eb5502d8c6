"""CLI command: sign (a SIF, as `apptainer sign` does, with a key from the user's keyring)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from hvd_container.cli.commands.common import JsonOpt
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.containers import signing


def sign(
    target: Annotated[
        Path,
        typer.Argument(
            metavar="SIF",
            help="The .sif file to sign: a signature object per object group is added to it.",
        ),
    ],
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            help="The GnuPG key to sign with: its fingerprint, key ID or user ID in your "
            "keyring (GNUPGHOME as gpg reads it). Default: gpg's default key.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Sign a SIF with your OpenPGP key, in the format `apptainer verify` checks.

    Each object group gets a signature of the sif library's integrity format: the header,
    every descriptor and every object's digest, clear-signed by gpg. Check it with
    `hvd-container inspect SIF --signatures --keyring KEY.asc` (or `apptainer verify`)."""
    with json_errors(as_json):
        done = signing.sign_sif(target, key)
    if as_json:
        emit({"path": str(target), "signatures": [asdict(s) for s in done]})
        return
    for s in done:
        typer.echo(f"{target}: group {s.group} signed by {s.fingerprint} (object {s.object_id})")


def register(app: typer.Typer) -> None:
    """Add `sign` to the app."""
    app.command("sign")(sign)
