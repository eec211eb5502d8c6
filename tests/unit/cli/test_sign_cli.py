"""`sign` and `inspect --signatures` as a user runs them: lines, --json records, exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fakes import write_sif
from _gpg_keys import Key
from _json_records import error, result

from hvd_container.cli.app import main


def test_sign_then_inspect_signatures(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, signer: Key, keys: tuple[Key, Key]
) -> None:
    sif = write_sif(tmp_path / "x.sif")
    assert main(["inspect", str(sif), "--signatures"]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"{sif}: group 1: signed by nobody: not checked\n"
        "not checked: give --keyring FILE with the public keys you trust\n"
    )

    assert main(["sign", str(sif), "--json"]) == 0
    record = result("sign", capsys.readouterr().out)
    assert record["signatures"] == [{"group": 1, "object_id": 3, "fingerprint": signer.fingerprint}]

    assert main(["inspect", str(sif), "--signatures", "--keyring", str(signer.public)]) == 0
    assert capsys.readouterr().out == f"{sif}: group 1: signed by {signer.fingerprint}: verified\n"
    assert (
        main(["inspect", str(sif), "--signatures", "--keyring", str(signer.public), "--json"]) == 0
    )
    record = result("inspect", capsys.readouterr().out)
    assert record["checked"] and record["groups"] == [
        {"group": 1, "fingerprints": [signer.fingerprint], "verified": True, "problems": []}
    ]

    stranger = str(keys[1].public)
    code = main(["inspect", str(sif), "--signatures", "--keyring", stranger, "--json"])
    captured = capsys.readouterr()
    assert code == 1 and error(captured.out)["exit_code"] == 1
    assert captured.err == (
        f"hvd-container: error: {sif}: group 1: signature 3: signed by key "
        f"{signer.fingerprint[-16:]}, which is not among the trusted keys\n"
    )


def test_keyring_without_signatures_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sif = write_sif(tmp_path / "x.sif")
    assert main(["inspect", str(sif), "--keyring", "k.asc"]) == 2
    assert capsys.readouterr().err == (
        "hvd-container: error: --keyring goes with --signatures (the keys to check them against)\n"
    )


def test_a_pushed_image_is_signed_with_a_key_file_named_before_anything_is_pushed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    image = "127.0.0.1:9/team/x:1"  # nothing listens there: each line comes before the registry
    assert main(["sign", image]) == 2
    assert capsys.readouterr().err == (
        f"hvd-container: error: {image}: a registry image is signed with a key file: --key "
        "KEY.pem (an ECDSA P-256 private key)\n"
    )
    assert main(["build", "cpu-bookworm", "--sign", str(tmp_path / "k.pem")]) == 2
    assert "--sign signs what is pushed: give --push REGISTRY too" in capsys.readouterr().err
    public = tmp_path / "k.pub"
    public.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    assert main(["push", "hvd-test/x:1", "-r", "127.0.0.1:9", "--sign", str(public)]) == 2
    assert f"{public}: not a PEM private key" in capsys.readouterr().err
