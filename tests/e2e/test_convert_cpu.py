"""The CPU training image converted natively to SIF and run from the SIF's own filesystem:
the image's Python does a 2-rank Horovod allreduce under the real Charliecloud runtime, with
the root filesystem mounted by squashfuse at the partition offset."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hvd_container.containers.sif.reader import read_sif

from tests.e2e.sif_fixtures import (  # noqa: F401 (fixtures)
    ch_run,
    charliecloud,
    docker_client,
    extract_from_sif,
    file_in_image,
    image_mtimes,
    mounted,
    sif_tools,
)
from tests.e2e.slurm_fixtures import cli, sif_of
from tests.unit._gpg_keys import Key, keys  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e

ALLREDUCE = """\
import horovod.torch as hvd
import torch

hvd.init()
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
print(f"rank {hvd.rank()} of {hvd.size()}: allreduce {total.item()}", flush=True)
"""


@pytest.fixture(scope="module")
def cpu_tag(request: pytest.FixtureRequest, docker_client: Any) -> str:  # noqa: F811
    """The build fixture's `cpu_image`, or the Docker tag in $HVD_E2E_CPU_IMAGE."""
    return str(os.environ.get("HVD_E2E_CPU_IMAGE") or request.getfixturevalue("cpu_image"))


@pytest.fixture(scope="module")
def cpu_native_sif(cpu_tag: str, sif_tools: None) -> Path:  # noqa: F811
    """`convert TAG --to sif`: the conversion the Slurm tests train from (made once per image
    id), so that CI pays for one conversion of this 2 GB image, not two."""
    return sif_of(cpu_tag)


def test_cpu_sif_layout_and_labels(cpu_tag: str, cpu_native_sif: Path, docker_client: Any) -> None:  # noqa: F811
    listing = subprocess.run(["siftool", "list", str(cpu_native_sif)], capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
    assert re.search(r"^\d+\s+\|1\s+\|NONE\s+\|\d+-\d+\s+\|FS \(Squashfs/\*System/amd64\)",
                     listing, re.M), listing  # fmt: skip
    info = read_sif(cpu_native_sif)
    image_labels = docker_client.images.get(cpu_tag).attrs["Config"].get("Labels") or {}
    assert image_labels.items() <= info.labels.items()
    assert info.arch == docker_client.images.get(cpu_tag).attrs["Architecture"]
    rootfs = subprocess.run(
        ["unsquashfs", "-o", str(info.rootfs_offset), "-l", str(cpu_native_sif),
         ".singularity.d", "opt/venv/bin"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "squashfs-root/.singularity.d/env/10-docker2singularity.sh" in rootfs
    assert "squashfs-root/opt/venv/bin/python" in rootfs


def test_the_sif_carries_the_images_bill_of_materials(cpu_tag: str, cpu_native_sif: Path) -> None:
    """The SBOM object is the image's own document, byte for byte; siftool still lists the
    file; `inspect --diff` between the image and its SIF finds nothing changed."""
    from hvd_container.containers.sif import format as fmt

    from hvd_container import facts

    info = read_sif(cpu_native_sif)
    (sbom,) = [d for d in info.descriptors if d.datatype == fmt.DATA_SBOM]
    in_image = file_in_image(cpu_tag, facts.BOM_FILE)
    assert info.bom == in_image and sbom.name == "bom.cdx.json"
    assert info.labels[facts.BOM] == facts.bom_digest(in_image)
    listed = subprocess.run(["siftool", "list", str(cpu_native_sif)], capture_output=True,
                            text=True)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    compared = cli("inspect", str(cpu_native_sif), "--diff", cpu_tag, "--json")
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["changes"] == []


HOROVOD_PKG = "opt/venv/lib/python3.11/site-packages/horovod"


def test_python_sources_keep_their_mtime_so_pycs_stay_valid(
    cpu_tag: str,
    cpu_native_sif: Path,
    docker_client: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    source = f"{HOROVOD_PKG}/__init__.py"
    pyc = f"{HOROVOD_PKG}/__pycache__/__init__.cpython-311.pyc"
    in_image = image_mtimes(docker_client, cpu_tag, f"/{source}")
    assert list(in_image) == ["__init__.py"], in_image
    root = extract_from_sif(cpu_native_sif, read_sif(cpu_native_sif).rootfs_offset,
                            [source, pyc], tmp_path / "x")  # fmt: skip
    stat = os.lstat(root / source)
    assert int(stat.st_mtime) == in_image["__init__.py"]
    # A timestamp .pyc (PEP 552 flags 0) records its source's mtime and size: they must match
    # inside the SIF, or Python recompiles on every import (the SIF is read-only).
    header = (root / pyc).read_bytes()[:16]
    flags = int.from_bytes(header[4:8], "little")
    if flags == 0:
        assert int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
        assert int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF
    else:
        assert flags & 1, f"unknown .pyc flags {flags}"  # hash-based: mtime not used


def test_two_rank_allreduce_from_the_sif_under_charliecloud(
    cpu_native_sif: Path,
    charliecloud: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    info = read_sif(cpu_native_sif)
    with mounted(cpu_native_sif, info.rootfs_offset, tmp_path / "rootfs") as root:
        # The exec action sources the SIF's env scripts (the image's ENV: PATH to /opt/venv).
        result = ch_run(
            root,
            "/.singularity.d/actions/exec",
            "horovodrun", "--gloo", "-np", "2", "-H", "localhost:2",
            "python", str(script),
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in (0, 1):
        assert re.search(rf"rank {rank} of 2: allreduce 3\.0", result.stdout), result.stdout


@pytest.fixture(scope="module")
def sif_integrity() -> str:
    """Sylabs' sif library signing and verifying (testbed/sif-integrity.sh): the outside oracle."""
    subprocess.run(["sh", "testbed/sif-integrity.sh", "up"], check=True)
    done = subprocess.run(["sh", "testbed/sif-integrity.sh", "status"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip()


def test_signatures_hold_both_ways_with_sylabs_own_library(
    cpu_native_sif: Path,
    sif_integrity: str,
    keys: tuple[Key, Key],  # noqa: F811
    tmp_path: Path,
) -> None:
    """`sign` writes what the sif library (Apptainer's `verify`) accepts, `inspect --signatures`
    accepts what the library signs; both refuse a partition changed after signing and a key
    that is not trusted."""
    signer, stranger = keys
    secret = tmp_path / "secret.asc"
    secret.write_bytes(
        subprocess.run(
            ["gpg", "--batch", "--armor", "--pinentry-mode", "loopback", "--passphrase", "",
             "--export-secret-keys"],
            env={**os.environ, "GNUPGHOME": str(signer.home)}, check=True, capture_output=True,
        ).stdout
    )  # fmt: skip

    def oracle(action: str, keyring: Path, sif: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sif_integrity, action, str(keyring), str(sif)], capture_output=True,
                              text=True)  # fmt: skip

    def checked(sif: Path, keyring: Path) -> subprocess.CompletedProcess[str]:
        return cli("inspect", str(sif), "--signatures", "--keyring", str(keyring))

    ours, theirs = tmp_path / "ours.sif", tmp_path / "theirs.sif"
    for copy in (ours, theirs):
        subprocess.run(["cp", "--sparse=always", str(cpu_native_sif), str(copy)], check=True)
    signed = cli("sign", str(ours), "--key", signer.fingerprint,
                 env={**os.environ, "GNUPGHOME": str(signer.home)})  # fmt: skip
    assert signed.returncode == 0, signed.stderr
    assert oracle("verify", signer.public, ours).returncode == 0
    listed = subprocess.run(["siftool", "list", str(ours)], capture_output=True, text=True,
                            check=True).stdout  # fmt: skip
    assert "Signature (SHA-256)" in listed

    made = oracle("sign", secret, theirs)
    assert made.returncode == 0, made.stderr
    verdict = checked(theirs, signer.public)
    assert verdict.returncode == 0, verdict.stderr
    assert f"signed by {signer.fingerprint}: verified" in verdict.stdout

    refused = oracle("verify", stranger.public, ours)
    assert refused.returncode == 1 and "unknown entity" in refused.stderr
    refused = checked(theirs, stranger.public)
    assert refused.returncode == 1 and "not among the trusted keys" in refused.stderr

    info = read_sif(ours)
    partition = next(d.id for d in info.descriptors if d.datatype == 0x4004)
    with open(ours, "r+b") as fh:  # one byte of the root filesystem, after signing
        fh.seek(info.rootfs_offset + info.rootfs_size // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
    refused = oracle("verify", signer.public, ours)
    assert refused.returncode == 1
    assert f"data object integrity compromised: {partition}" in refused.stderr
    refused = checked(ours, signer.public)
    assert refused.returncode == 1 and f"object {partition}'s data changed" in refused.stderr
