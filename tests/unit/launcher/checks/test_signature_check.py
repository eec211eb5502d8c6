"""The image's signature checked before a launch (images.signatures in a site profile, or
--keyring): refused where the site requires one, said where it does not, and the batch script
pins the file that was checked (its line run here by bash)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from _fakes import write_sif
from _gpg_keys import Key
from _launch_helpers import isolated, plan_launch  # noqa: F401
from hvd_container.containers import signing
from hvd_container.launcher.checks.registry import Result
from hvd_container.launcher.plan.planner import plan as planned
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import load_site, validate_site_file
from hvd_container.launcher.sites.model import ImageSignatures, Site

from hvd_container.core.errors import UserError

pytestmark = pytest.mark.usefixtures("isolated")


def site_with(name: str = "local", **signatures: Any) -> Site:
    site = load_site(name)
    images = site.images.model_copy(update={"signatures": ImageSignatures(**signatures)})
    return site.model_copy(update={"images": images})


def signature_result(site: Site, **fields: Any) -> Result:
    request = LaunchRequest(**{"script": "train.py", "nodes": 1, **fields})
    done = planned(site, request, dry_run=True, keep_going=True)
    return next(r for r in done.results if r.check == "signature")


def batch_script(site: Site, **fields: Any) -> str:
    request = LaunchRequest(**{"script": "train.py", "nodes": 1, **fields})
    script = plan_launch(site, request, "batch").script
    assert script is not None
    return script


def pin_line(script: str) -> str:
    (line,) = [line for line in script.splitlines() if "sha256sum" in line]
    return line.strip()


def test_nobody_asked_no_check_and_no_pin(tmp_path: Path) -> None:
    sif = write_sif(tmp_path / "x.sif")
    found = signature_result(site_with(), image=str(sif))
    assert found.status == "n/a"
    assert "sha256sum" not in batch_script(site_with(), image=str(sif))


def test_a_signed_sif_passes_and_the_batch_script_pins_it(tmp_path: Path, signer: Key) -> None:
    sif = write_sif(tmp_path / "x.sif")
    signing.sign_sif(sif, signer.fingerprint)
    site = site_with(required=True, keys=[str(signer.public)])
    assert signature_result(site, image=str(sif)) == Result(
        "signature", "pass", f"{sif}: signed by {signer.fingerprint}"
    )
    line = pin_line(batch_script(site, image=str(sif)))
    assert subprocess.run(["bash", "-c", line], capture_output=True).returncode == 0
    with open(sif, "ab") as fh:  # the file on the cluster changes after the check
        fh.write(b"\0")
    after = subprocess.run(["bash", "-c", line], capture_output=True, text=True)
    assert after.returncode == 1
    assert after.stderr == (
        f"hvd-container: {sif} changed since its signature was checked: not run\n"
    )
    # --keyring trusts the user's own key the same way, with nothing in the profile
    sif2 = write_sif(tmp_path / "y.sif")
    signing.sign_sif(sif2, signer.fingerprint)
    found = signature_result(site_with(), image=str(sif2), keyrings=[str(signer.public)])
    assert found.status == "pass"


def test_where_the_site_requires_a_signature_an_unsigned_or_strangers_image_is_refused(
    tmp_path: Path, keys: tuple[Key, Key], monkeypatch: pytest.MonkeyPatch
) -> None:
    signer, stranger = keys
    site = site_with(required=True, keys=[str(signer.public)])
    sif = write_sif(tmp_path / "x.sif")
    request = LaunchRequest(script="train.py", nodes=1, image=str(sif))
    with pytest.raises(UserError) as refused:
        plan_launch(site, request)
    assert str(refused.value) == (
        f"{sif}: group 1: not signed: site local requires a signed image; sign it with a "
        f"trusted key (`hvd-container sign {sif}`), or trust the signer's public key with "
        "--keyring FILE"
    )
    monkeypatch.setenv("GNUPGHOME", str(stranger.home))
    signing.sign_sif(sif, stranger.fingerprint)
    found = signature_result(site, image=str(sif))
    assert found.status == "fail"
    assert f"group 1: signature 3: signed by key {stranger.fingerprint[-16:]}, which is not " \
        "among the trusted keys" in found.message  # fmt: skip


def test_where_it_is_not_required_an_unsigned_image_is_said_not_refused(
    tmp_path: Path, signer: Key
) -> None:
    sif = write_sif(tmp_path / "x.sif")
    found = signature_result(site_with(), image=str(sif), keyrings=[str(signer.public)])
    assert found == Result("signature", "warn", f"{sif}: group 1: not signed")
    assert "sha256sum" not in batch_script(
        site_with(), image=str(sif), keyrings=[str(signer.public)]
    )


def test_a_registry_image_that_cannot_be_judged_never_passes(tmp_path: Path, signer: Key) -> None:
    fields = {"image": "u/i:t", "account": "m1_g"}
    optional = signature_result(site_with("perlmutter", keys=[str(signer.public)]), **fields)
    assert optional == Result(
        "signature", "skip", "u/i:t: a short Docker Hub name, whose signature is not checked: "
        "name its registry (docker.io/NAME:TAG) or run a signed SIF",
    )  # fmt: skip
    required = signature_result(site_with("perlmutter", required=True), **fields)
    assert required.status == "fail"
    assert required.message.startswith("site perlmutter requires a signed image: u/i:t: ")
    # a registry named, but only OpenPGP keys trusted: nothing can check it
    named = {**fields, "image": "127.0.0.1:9/u/i:t"}
    pgp_only = signature_result(site_with("perlmutter", keys=[str(signer.public)]), **named)
    assert pgp_only.status == "skip"
    assert "none of the trusted keys is a PEM public key" in pgp_only.message
    # a PEM key, and a registry out of reach (nothing listens on port 9)
    pem = tmp_path / "cosign.pub"
    pem.write_text(
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAELigCnlLNKgOglRTx1D7JhI7eRw99\n"
        "QolE9Jo4QUxnbMy5nUuBL+UZF9qqfm/Dg1BNeHRThHzWh2ki9vAEgWEDOw==\n-----END PUBLIC KEY-----\n"
    )  # the public key of the cosign spec's example
    away = signature_result(site_with("perlmutter", required=True, keys=[str(pem)]), **named)
    assert away.status == "fail"
    assert away.message.startswith(
        "site perlmutter requires a signed image: registry 127.0.0.1:9/u/i: "
    )


def test_keyring_and_profile_keys_are_checked_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^--keyring nokey\.asc: no such file \(expected an "):
        plan_launch(load_site("local"), LaunchRequest(script="t.py", keyrings=["nokey.asc"]))
    profile = tmp_path / "mysite.yaml"
    profile.write_text(
        "name: mysite\nruntime:\n  kind: apptainer\n"
        "images:\n  signatures:\n    required: true\n    keys: [keys/site.asc, /etc/x.txt]\n"
    )
    with pytest.raises(UserError) as bad:
        validate_site_file(profile)
    assert [p.split(": ", 2)[1:] for p in bad.value.problems] == [
        ["images.signatures.keys", "'keys/site.asc': not a key file path (allowed: an absolute "
         "path of letters, digits and _ . + @ = - ending in .asc, .gpg, .pgp, .pub, .key, "
         ".pem)"],
    ]  # fmt: skip
    profile.write_text(profile.read_text().replace("keys/site.asc, ", ""))
    with pytest.raises(UserError, match=r"'/etc/x\.txt': not a key file path"):
        validate_site_file(profile)


def test_a_file_not_on_this_machine_is_left_to_the_image_check(tmp_path: Path) -> None:
    """doctor away from the cluster: the image check says the file is not here; the signature
    check says it could not judge, and neither passes."""
    site = site_with(required=True, keys=["/etc/site.asc"])
    results = {
        r.check: r
        for r in planned(
            site,
            LaunchRequest(script="t.py", nodes=1, image=str(tmp_path / "gone.sif")),
            dry_run=True,
            keep_going=True,
        ).results
    }
    assert results["signature"] == Result(
        "signature", "skip", f"{tmp_path / 'gone.sif'}: not on this machine, its signature is "
        "checked where it is",
    )  # fmt: skip
    assert results["image"].status == "fail"
    directory = signature_result(site, image=str(tmp_path))
    assert directory.status == "fail"
    assert "not a SIF file here" in directory.message


def test_a_signed_registry_image_runs_by_the_digest_checked_where_the_runtime_can() -> None:
    from hvd_container.launcher import runtimes
    from hvd_container.launcher.plan.signature import ImageSignature, pinned_image

    digest = "sha256:" + "ab" * 32
    held = ImageSignature(
        required=True, keys=("/k.pub",), path="r.example:5000/team/x:1", signers=("f",),
        digest=digest, registry=True,
    )  # fmt: skip
    site = load_site("perlmutter")

    def runtime(kind: str) -> runtimes.Runtime:
        return runtimes.runtime(site.runtime_for(kind))

    for kind in ("apptainer", "podman-hpc"):
        assert pinned_image("r.example:5000/team/x:1", held, runtime(kind)) == (
            f"r.example:5000/team/x@{digest}"
        )
        assert pinned_image("docker://r.example:5000/team/x", held, runtime(kind)) == (
            f"r.example:5000/team/x@{digest}"
        )
    # shifter's gateway pulls by tag: the image stays as named (the check warns)
    assert pinned_image("r.example:5000/team/x:1", held, runtime("shifter")) == (
        "r.example:5000/team/x:1"
    )
    unheld = ImageSignature(
        required=True, keys=("/k.pub",), path="r.example:5000/team/x:1",
        problems=("not signed",), registry=True,
    )  # fmt: skip
    assert pinned_image("r.example:5000/team/x:1", unheld, runtime("apptainer")) == (
        "r.example:5000/team/x:1"
    )
    assert pinned_image("r.example:5000/team/x:1", None, runtime("apptainer")) == (
        "r.example:5000/team/x:1"
    )


def test_a_held_registry_signature_passes_pinned_and_warns_where_the_tag_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry's answer stands in (the real one is tests/e2e/test_image_signatures.py):
    the verdict names the digest the job runs, or warns that the runtime runs the tag."""
    from hvd_container.containers import cosign

    digest = "sha256:" + "ab" * 32
    asked: list[str] = []

    def held(ref: str, keys: Any) -> cosign.ImageCheck:
        asked.append(ref)
        return cosign.ImageCheck(f"r.example/t/x@{digest}", digest, ["f1"], [], 1)

    monkeypatch.setattr(signing, "check_image", held)
    pem = tmp_path / "k.pub"
    pem.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    fields = {"image": "r.example/t/x:1", "account": "m1_g", "keyrings": [str(pem)]}
    pinned = signature_result(site_with("perlmutter"), runtime="podman-hpc", **fields)
    assert pinned == Result(
        "signature", "pass",
        f"r.example/t/x:1: signed by f1; the job runs r.example/t/x@{digest}, the image checked",
    )  # fmt: skip
    by_tag = signature_result(site_with("perlmutter"), **fields)  # shifter
    assert by_tag.status == "warn"
    assert by_tag.message == (
        "r.example/t/x:1: signed by f1, but runtime shifter runs a registry image by its tag: "
        f"the job runs what the tag names when it starts (it named {digest} when checked)"
    )
    assert asked == ["r.example/t/x:1", "r.example/t/x:1"]
