"""CLI command: sign (a SIF, as `apptainer sign` does, with a key from the user's keyring; a
pushed image, as `cosign sign --key` does, with a PEM key file)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from hvd_container.cli.commands.common import JsonOpt
from hvd_container.cli.json_output import emit, json_errors
from hvd_container.containers import signing
from hvd_container.core.errors import UserError


def sign(
    target: Annotated[
        str,
        typer.Argument(
            metavar="SIF|IMAGE",
            help="A .sif file (a signature object per object group is added to it), or a "
            "pushed image REGISTRY/REPOSITORY[:TAG|@DIGEST] (signed by its digest, the "
            "signature stored beside it as cosign stores them).",
        ),
    ],
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            help="A SIF: the GnuPG key to sign with (fingerprint, key ID or user ID in your "
            "keyring, GNUPGHOME as gpg reads it; default: gpg's default key). An image: the "
            "ECDSA P-256 private key file (PEM; an encrypted one's password in "
            "$COSIGN_PASSWORD).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Sign a SIF with your OpenPGP key, or a pushed image with your key file.

    A SIF: each object group gets a signature of the sif library's integrity format (the
    header, every descriptor and every object's digest, clear-signed by gpg); check it with
    `hvd-container inspect SIF --signatures --keyring KEY.asc` or `apptainer verify`. An image:
    a simple signing payload naming its digest, signed with ECDSA P-256, at the tag
    sha256-<hex>.sig in its repository; check it with `hvd-container inspect IMAGE
    --signatures --keyring KEY.pub` or `cosign verify --key KEY.pub IMAGE`."""
    with json_errors(as_json):
        if signing.is_image_target(target):
            if key is None:
                raise UserError(
                    f"{target}: a registry image is signed with a key file: --key KEY.pem "
                    "(an ECDSA P-256 private key)"
                )
            signed = signing.sign_image(target, Path(key))
            done = None
        else:
            done = signing.sign_sif(Path(target), key)
    if done is None:
        if as_json:
            emit({"path": target, "image": asdict(signed)})
        else:
            typer.echo(f"{signed.image}: signed by key {signed.key} (stored at {signed.tag})")
        return
    if as_json:
        emit({"path": target, "signatures": [asdict(s) for s in done]})
        return
    for s in done:
        typer.echo(f"{target}: group {s.group} signed by {s.fingerprint} (object {s.object_id})")


def register(app: typer.Typer) -> None:
    """Add `sign` to the app."""
    app.command("sign")(sign)
