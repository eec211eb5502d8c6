"""SIF files are data from outside: each crafted file below is a one-line error or safe output,
and nothing printed carries a raw control character."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.layout import DataObject, sif_prefix
from hvd_container.containers.sif.reader import read_sif

from hvd_container.cli.app import main
from hvd_container.core.errors import UserError
from hvd_container.facts import facts_from_labels

UNSAFE = ["\x1b", "\r", "\x07", "\x9b", "\u202e"]


def sif_with_labels(tmp_path: Path, labels_json: bytes) -> Path:
    objects = [DataObject(fmt.DATA_LABELS, labels_json, name="labels.json")]
    prefix = sif_prefix(objects, partition_size=4, arch="amd64", created=1, image_id=uuid.uuid4())
    path = tmp_path / "x.sif"
    path.write_bytes(prefix + b"root")
    return path


def inspect(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hvd_container", "inspect", str(path), *extra],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip


def test_a_huge_integer_label_is_one_line(tmp_path: Path) -> None:
    path = sif_with_labels(tmp_path, b'{"n": ' + b"9" * 100_000 + b"}")
    done = inspect(path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-500:]
    assert "is not valid JSON" in done.stderr and "Traceback" not in done.stderr


def test_control_sequences_and_lone_surrogates_are_printed_as_escapes(tmp_path: Path) -> None:
    labels = {"title": "\x1b]0;owned\x07\rbad", "rtl": "a\u202eb", "odd": "\ud800"}
    path = sif_with_labels(tmp_path, json.dumps(labels).encode())
    done = inspect(path)
    assert done.returncode == 0, done.stderr
    assert not any(c in done.stdout for c in UNSAFE)
    assert "title: \\x1b]0;owned\\x07\\x0dbad" in done.stdout
    assert "rtl: a\\u202eb" in done.stdout and "odd: \\ud800" in done.stdout
    as_json = inspect(path, "--json")
    assert as_json.returncode == 0 and not any(c in as_json.stdout for c in UNSAFE)
    assert json.loads(as_json.stdout)["labels"]["title"] == labels["title"]


def test_an_error_naming_a_hostile_descriptor_is_escaped(tmp_path: Path) -> None:
    objects = [DataObject(fmt.DATA_LABELS, b"not json", name="\x1b[2Jlabels")]
    prefix = sif_prefix(objects, partition_size=4, arch="amd64", created=1, image_id=uuid.uuid4())
    path = tmp_path / "x.sif"
    path.write_bytes(prefix + b"root")
    done = inspect(path)
    assert done.returncode == 2 and "\x1b" not in done.stderr and "\\x1b[2Jlabels" in done.stderr


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_file_that_is_not_regular_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        path = tmp_path / "x.sif"
        os.mkfifo(path)  # nothing writes to it: an open for reading would block
    else:
        path = Path("/dev/zero") if kind == "device" else tmp_path
    started = time.monotonic()
    done = inspect(path)
    assert time.monotonic() - started < 5
    expected = {"fifo": "is a named pipe", "device": "is a character device", "directory": "is a directory"}[kind]  # fmt: skip
    assert done.returncode == 2 and expected in done.stderr and done.stderr.count("\n") == 1


def test_an_unknown_format_version_is_refused(tmp_path: Path) -> None:
    path = sif_with_labels(tmp_path, b"{}")
    data = bytearray(path.read_bytes())
    fields = list(fmt.HEADER.unpack_from(data))
    fields[2] = b"99"
    data[: fmt.HEADER.size] = fmt.HEADER.pack(*fields)
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match=r"SIF format version '99' is not supported \(allowed: 01"):
        read_sif(path)


def test_a_root_filesystem_over_the_descriptor_table_is_refused(tmp_path: Path) -> None:
    path = sif_with_labels(tmp_path, b"{}")
    data = bytearray(path.read_bytes())
    header = fmt.HEADER.unpack_from(data)
    descr_offset = header[9]
    for i in range(header[8]):  # point every used descriptor at the table itself
        at = descr_offset + i * fmt.DESCRIPTOR.size
        fields = list(fmt.DESCRIPTOR.unpack_from(data, at))
        if fields[1]:
            fields[5] = descr_offset
            data[at : at + fmt.DESCRIPTOR.size] = fmt.DESCRIPTOR.pack(*fields)
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="outside the data area"):
        read_sif(path)


@pytest.mark.parametrize("name", ["/etc/passwd", "../../recipes/x", "cpu-bookworm/../../y"])
def test_a_recipe_name_label_is_never_followed_as_a_path(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hvd_container.launcher.plan import image

    opened: list[str] = []
    monkeypatch.setattr(image, "facts_from_recipe", lambda ref: opened.append(ref))
    found = facts_from_labels(
        {"org.hvd-container.recipe.name": name, "org.hvd-container.arch": "amd64"},
        "image x",
        recipe_lookup=image.builtin_recipe_facts,
    )
    assert found is not None and found.name == name and opened == []


def test_a_builtin_recipe_name_label_reads_the_shipped_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "cpu-bookworm").write_text("not a recipe")  # a file of that name here is not it
    monkeypatch.chdir(tmp_path)
    from hvd_container.launcher.plan.image import builtin_recipe_facts

    found = facts_from_labels(
        {"org.hvd-container.recipe.name": "cpu-bookworm"},
        "image x",
        recipe_lookup=builtin_recipe_facts,
    )
    assert found is not None and found.mpi_pmi == ("pmix",)


def test_the_cli_prints_no_raw_control_characters_in_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--site", "local", "--image", "x\x1b[31m.sif", "--dry-run", "t.py"]) in (
        0,
        2,
    )
    err = capsys.readouterr().err
    assert "\x1b" not in err
