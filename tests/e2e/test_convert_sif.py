"""Native SIF conversion against the real tools: Docker, tar2sqfs, siftool, unsquashfs,
squashfuse and Charliecloud's ch-run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hvd_container.containers.sif.reader import read_sif

from tests.e2e.sif_fixtures import (  # noqa: F401 (fixtures)
    LABELS,
    ch_run,
    charliecloud,
    cli,
    docker_client,
    extract_from_sif,
    image_mtimes,
    import_image,
    mounted,
    shell_image,
    shell_rootfs,
    sif_tools,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def shell_sif(shell_image: str, sif_tools: None, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    target = tmp_path_factory.mktemp("sif") / "shell.sif"
    result = cli("convert", shell_image, "--to", "sif", "-o", str(target))
    assert result.returncode == 0, result.stderr
    return target


def test_json_conversion_reports_progress_then_the_result(
    shell_image: str,  # noqa: F811
    sif_tools: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    from tests._json_records import records, result

    target = tmp_path / "progress.sif"
    done = cli("convert", shell_image, "--to", "sif", "-o", str(target), "--json")
    assert done.returncode == 0, done.stderr
    record = result("convert", done.stdout)  # every line checked against its schema
    assert record["path"] == str(target) and record["size"] == target.stat().st_size
    progress = [r for r in records(done.stdout) if r["event"] == "progress"]
    assert progress and progress[-1]["phase"] == "export"
    assert progress[-1]["done"] > 0 and progress[-1]["written"] > 0
    again = tmp_path / "plain.sif"  # the first is this conversion already: it would be kept
    plain = cli("convert", shell_image, "--to", "sif", "-o", str(again), "--progress", "plain")
    assert plain.returncode == 0, plain.stderr
    assert re.search(r"^\[export\]    .* MB/s", plain.stdout, re.M), plain.stdout


def test_a_sif_already_converted_from_the_image_is_kept(
    shell_image: str,  # noqa: F811
    docker_client: Any,  # noqa: F811
    sif_tools: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A second `convert` of the same image to the same file writes nothing: the file there
    was made from this image id, for its arch, with this compressor. Another compressor, or
    another image under the same tag, converts again."""
    target = tmp_path / "x.sif"
    wrote = rf"^wrote {re.escape(str(target))} "  # the last line, after the progress lines
    first = cli("convert", shell_image, "--to", "sif", "-o", str(target))
    assert first.returncode == 0 and re.search(wrote, first.stdout, re.M), first.stdout
    made = target.stat()
    again = cli("convert", shell_image, "--to", "sif", "-o", str(target), "--json")
    assert again.returncode == 0, again.stderr
    record = json.loads(again.stdout.splitlines()[-1])
    assert record["kept"] is True and record["size"] == made.st_size
    assert (target.stat().st_ino, target.stat().st_mtime_ns) == (made.st_ino, made.st_mtime_ns)
    plain = cli("convert", shell_image, "--to", "sif", "-o", str(target))
    kept = rf"^kept {re.escape(str(target))}: already the SIF of {re.escape(shell_image)} "
    assert re.search(kept, plain.stdout, re.M), plain.stdout
    zstd = cli("convert", shell_image, "--to", "sif", "-o", str(target), "--compression", "zstd")
    assert zstd.returncode == 0 and re.search(wrote, zstd.stdout, re.M), zstd.stdout
    assert target.stat().st_ino != made.st_ino
    # the same tag, another image: converted again
    tag = import_image(docker_client, "hvd-test/kept:1", shell_rootfs(extra_bytes=4096), LABELS)
    other = tmp_path / "k.sif"
    try:
        one = cli("convert", tag, "--to", "sif", "-o", str(other))
        assert re.search(r"^wrote ", one.stdout, re.M), one.stdout + one.stderr
        import_image(docker_client, tag, shell_rootfs(extra_bytes=8192), LABELS)
        two = cli("convert", tag, "--to", "sif", "-o", str(other))
        assert two.returncode == 0 and re.search(r"^wrote ", two.stdout, re.M), two.stdout
    finally:
        docker_client.images.remove(tag, force=True)


def test_siftool_lists_the_primary_partition_in_group_1(shell_sif: Path) -> None:
    listing = subprocess.run(["siftool", "list", str(shell_sif)], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
    rows = [line.split("|") for line in listing.splitlines() if re.match(r"^\d+\s+\|", line)]
    kinds = {row[4].strip(): row[1].strip() for row in rows}
    assert kinds["FS (Squashfs/*System/amd64)"] == "1"
    assert kinds["Def.FILE"] == "1"
    assert kinds["JSON.Generic"] == "1"
    header = subprocess.run(["siftool", "header", str(shell_sif)], capture_output=True, text=True,
                            check=True).stdout  # fmt: skip
    assert re.search(r"Primary Architecture:\s+amd64", header)
    assert header.startswith("Launch Script:") and "run-singularity" in header
    start = int(re.search(r"\|(\d+)-\d+\s+\|FS", listing).group(1))  # type: ignore[union-attr]
    assert start % 4096 == 0
    assert start == read_sif(shell_sif).rootfs_offset


def test_unsquashfs_reads_the_rootfs_in_place(shell_sif: Path) -> None:
    info = read_sif(shell_sif)
    listing = subprocess.run(
        ["unsquashfs", "-o", str(info.rootfs_offset), "-l", str(shell_sif)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for path in (
        ".singularity.d/runscript",
        ".singularity.d/env/10-docker2singularity.sh",
        ".singularity.d/labels.json",
        ".singularity.d/actions/run",
        "singularity",
        "bin/sh",
    ):
        assert f"squashfs-root/{path}\n" in listing


def test_files_keep_their_own_mtime(
    shell_sif: Path,
    shell_image: str,  # noqa: F811
    docker_client: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    # The image's entry as the engine streams it: the fixture's tar recorded 1_600_000_000.
    assert image_mtimes(docker_client, shell_image, "/bin/sh") == {"sh": 1_600_000_000}
    root = extract_from_sif(shell_sif, read_sif(shell_sif).rootfs_offset, ["bin/sh"],
                            tmp_path / "x")  # fmt: skip
    # Not the conversion time: tar2sqfs keeps the stream's mtimes (no -k/--no-keep-time).
    assert int(os.lstat(root / "bin/sh").st_mtime) == 1_600_000_000


def test_runscript_env_and_labels_work_under_charliecloud(
    shell_sif: Path,
    charliecloud: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    info = read_sif(shell_sif)
    with mounted(shell_sif, info.rootfs_offset, tmp_path / "mnt") as root:
        default = ch_run(root, "/.singularity.d/actions/run")
        assert default.returncode == 0, default.stderr
        assert default.stdout == "[hello world][default arg]"
        replaced = ch_run(root, "/.singularity.d/actions/run", "x y", "z")
        assert replaced.stdout == "[hello world][x y][z]"
        labels = json.loads((root / ".singularity.d/labels.json").read_text())
    assert labels["org.hvd-container.versions.python"] == "3.11"
    assert info.build_facts["versions.python"] == "3.11"
    assert info.build_facts["sif.source-image"] == "hvd-test/sif-shell:1"


def test_inspect_prints_descriptors_and_facts(shell_sif: Path) -> None:
    text = cli("inspect", str(shell_sif))
    assert text.returncode == 0
    assert "FS (Squashfs/*System/amd64)" in text.stdout
    assert "versions.python: 3.11" in text.stdout
    data = json.loads(cli("inspect", str(shell_sif), "--json").stdout)
    assert data["arch"] == "amd64"
    assert data["build_facts"]["arch"] == "amd64"


@pytest.mark.parametrize("compressor", ["zstd", "xz"])
def test_other_compressors(
    shell_image: str,  # noqa: F811
    sif_tools: None,  # noqa: F811
    tmp_path: Path,
    compressor: str,
) -> None:
    target = tmp_path / "x.sif"
    result = cli("convert", shell_image, "--to", "sif", "-o", str(target),
                 "--compression", compressor)  # fmt: skip
    assert result.returncode == 0, result.stderr
    stats = subprocess.run(
        ["unsquashfs", "-s", "-o", str(read_sif(target).rootfs_offset), str(target)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"Compression {compressor}" in stats


def test_reproducible_with_source_date_epoch(
    shell_image: str,  # noqa: F811
    sif_tools: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    env = {"SOURCE_DATE_EPOCH": "1700000000"}
    outputs = []
    for name in ("a.sif", "b.sif"):
        assert cli("convert", shell_image, "--to", "sif", "-o", str(tmp_path / name),
                   env=env).returncode == 0  # fmt: skip
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1]
    info = read_sif(tmp_path / "a.sif")
    assert info.created == 1700000000
    root = extract_from_sif(tmp_path / "a.sif", info.rootfs_offset,
                            ["bin/sh", "etc/hostname"], tmp_path / "x")  # fmt: skip
    # Older than the epoch: kept as in the image. Docker writes /etc/hostname when it creates
    # the export's container, so its mtime is "now" and the clamp brings it to the epoch.
    assert int(os.lstat(root / "bin/sh").st_mtime) == 1_600_000_000
    assert int(os.lstat(root / "etc/hostname").st_mtime) == 1700000000


def test_missing_image_and_wrong_arch(shell_image: str, tmp_path: Path) -> None:  # noqa: F811
    target = tmp_path / "x.sif"
    missing = cli("convert", "hvd-test/no-such-image:1", "--to", "sif", "-o", str(target))
    assert missing.returncode == 2
    assert "not found in the local Docker engine" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    arch = cli("convert", shell_image, "--to", "sif", "-o", str(target), "--arch", "ppc64le")
    assert arch.returncode == 2
    assert "--arch ppc64le" in arch.stderr and "amd64" in arch.stderr
    assert list(tmp_path.iterdir()) == []


def test_full_disk_leaves_nothing_behind(shell_image: str, sif_tools: None, tmp_path: Path) -> None:  # noqa: F811
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)], check=True)
    try:
        result = cli("convert", shell_image, "--to", "sif", "-o", str(small / "x.sif"))
        assert result.returncode == 2, result.stderr
        assert "no space left" in result.stderr
        assert list(small.iterdir()) == []
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_a_disk_that_fills_in_the_middle_of_a_conversion_leaves_no_partial_sif(
    docker_client: Any,  # noqa: F811
    sif_tools: None,  # noqa: F811
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """Some megabytes of the SIF are written before the disk is full (an 8 MiB tmpfs, an
    image of 64 MiB that does not compress)."""
    image = import_image(docker_client, "hvd-test/sif-fill:1", shell_rootfs(extra_bytes=64 << 20))
    request.addfinalizer(lambda: docker_client.images.remove(image, force=True))
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(small)], check=True)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hvd_container", "convert", image, "--to", "sif",
             "-o", str(small / "x.sif")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        most = 0
        while proc.poll() is None:
            fs = os.statvfs(small)
            most = max(most, (fs.f_blocks - fs.f_bfree) * fs.f_frsize)
            time.sleep(0.005)
        _, err = proc.communicate()
        assert proc.returncode == 2, err
        assert most > 1 << 20, f"only {most} bytes were written before it failed"
        lines = err.strip().splitlines()
        assert lines[-1].startswith("hvd-container: error: no space left on the device"), lines
        assert "nothing was left behind" in lines[-1]
        assert list(small.iterdir()) == []
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_truncated_sif_is_a_clear_error(shell_sif: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.sif"
    cut.write_bytes(shell_sif.read_bytes()[: read_sif(shell_sif).rootfs_offset + 1000])
    result = cli("inspect", str(cut))
    assert result.returncode == 2
    assert result.stderr.startswith("hvd-container: error: ") and "truncated SIF" in result.stderr
    assert "Traceback" not in result.stderr


def test_interrupted_conversion_leaves_nothing_behind(
    docker_client: Any,  # noqa: F811
    sif_tools: None,  # noqa: F811
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    image = import_image(docker_client, "hvd-test/sif-big:1", shell_rootfs(extra_bytes=200 << 20))
    request.addfinalizer(lambda: docker_client.images.remove(image, force=True))
    target = tmp_path / "big.sif"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hvd_container", "convert", image, "--to", "sif",
         "-o", str(target), "--compression", "xz"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not any(p.name.endswith(".part") for p in tmp_path.iterdir()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert list(tmp_path.iterdir()) == []
    leftovers = docker_client.containers.list(all=True, filters={"ancestor": image})
    assert leftovers == []
