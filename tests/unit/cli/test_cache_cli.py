"""`hvd-container cache list|prune`: the images unpacked for ch-run, and unpacks that died."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from _json_records import result
from hvd_container.containers.sif.layout import sif_prefix
from hvd_container.launcher.runtimes import charliecloud as cc

from hvd_container.cli.app import main

A, B, C, D = ("a" * 24, "b" * 24, "c" * 24, "d" * 24)


def _made(base: Path, name: str) -> Path:
    """A name in the cache as the tool makes it: recorded first."""
    cc._record(base, name)
    return base / name


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HVD_CONTAINER_CACHE", str(tmp_path))
    base = tmp_path / "images"
    for key in (A, B):
        (_made(base, key) / "etc").mkdir(parents=True)
        (base / key / "etc" / "f").write_bytes(b"x" * 1000)
        _made(base, f"{key}.env").write_text("A=1\n")
    old = _made(base, f"{C}.part-1-abababab")  # an unpack whose process died two hours ago
    old.mkdir()
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    _made(base, f"{D}.part-2-cdcdcdcd").mkdir()  # an unpack running now
    return base


def test_list_shows_sizes_and_unfinished_unpacks(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cache", "list", "--json"]) == 0
    record = result("cache-list", capsys.readouterr().out)
    by_key = {row["key"]: row for row in record["images"]}
    assert set(by_key) == {A, B, C, D}
    assert by_key[A]["bytes"] >= 1000 and not by_key[A]["partial"]
    assert by_key[C]["partial"] is True
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert "(unfinished unpack)" in out and out.rstrip().endswith(f"in {cache}")


def test_prune_keeps_what_is_asked_and_running_unpacks(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cc, "key_of", lambda image: A)
    assert main(["cache", "prune", "--keep", "a.sif", "--json"]) == 0
    record = result("cache-prune", capsys.readouterr().out)
    assert sorted(Path(p).name for p in record["removed"]) == [
        B,
        f"{B}.env",
        f"{C}.part-1-abababab",
    ]
    left = sorted(p.name for p in cache.iterdir())
    assert left == [".hvd-container-made", A, f"{A}.env", f"{D}.part-2-cdcdcdcd"]
    assert sorted(os.listdir(cache / ".hvd-container-made")) == [
        A,
        f"{A}.env",
        f"{D}.part-2-cdcdcdcd",
    ]


def test_keep_must_be_a_sif(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    assert main(["cache", "prune", "--keep", str(other)]) == 2
    assert "not a SIF file (only SIFs are unpacked into the cache)" in capsys.readouterr().err
    assert (cache / B).is_dir()  # nothing removed on bad input


def test_a_site_profile_moves_the_cache_off_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HVD_CONTAINER_CACHE", raising=False)
    monkeypatch.setenv("SCRATCH", str(tmp_path / "scratch"))
    assert cc.cache_dir("$SCRATCH/hvd") == tmp_path / "scratch" / "hvd" / "images"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cc.cache_dir(None) == tmp_path / "xdg" / "hvd-container" / "images"
    monkeypatch.setenv("HVD_CONTAINER_CACHE", str(tmp_path / "env"))  # the variable wins
    assert cc.cache_dir("$SCRATCH/hvd") == tmp_path / "env" / "images"


def _sif(path: Path, image_id: int) -> Path:
    """A real SIF header (the project's writer) in front of a stand-in partition."""
    payload = b"hsqs" + bytes(4092)
    prefix = sif_prefix(
        [], partition_size=len(payload), arch="amd64", created=1700000000,
        image_id=uuid.UUID(int=image_id),
    )  # fmt: skip
    path.write_bytes(prefix + payload)
    return path


def test_prune_stale_removes_only_copies_of_replaced_or_deleted_sifs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HVD_CONTAINER_CACHE", str(tmp_path / "cache"))
    # unsquashfs stand-in (the e2e suite unpacks for real): the directory appears
    monkeypatch.setattr(cc, "_unpack_sif", lambda sif, target: (target / "etc").mkdir(parents=True))
    cpu, tf, gone = tmp_path / "cpu.sif", tmp_path / "tf.sif", tmp_path / "gone.sif"
    old_cpu = cc.prepare_image(str(_sif(cpu, 1))).root.name
    current_tf = cc.prepare_image(str(_sif(tf, 2))).root.name
    old_gone = cc.prepare_image(str(_sif(gone, 3))).root.name
    new_cpu = cc.prepare_image(str(_sif(cpu, 4))).root.name  # converted again: a new image, new key
    gone.unlink()
    assert len({old_cpu, current_tf, old_gone, new_cpu}) == 4

    assert main(["cache", "list", "--json"]) == 0
    rows = {r["key"]: r for r in result("cache-list", capsys.readouterr().out)["images"]}
    assert {k for k, r in rows.items() if r["stale"]} == {old_cpu, old_gone}
    assert rows[new_cpu]["source"] == rows[old_cpu]["source"] == str(cpu.resolve())
    assert main(["cache", "list"]) == 0
    assert f"from {gone.resolve()}  (stale" in capsys.readouterr().out

    assert main(["cache", "prune", "--stale", "--json"]) == 0
    removed = {Path(p).name for p in result("cache-prune", capsys.readouterr().out)["removed"]}
    assert removed == {f"{k}{ext}" for k in (old_cpu, old_gone) for ext in ("", ".env", ".source")}
    assert {e.key for e in cc.entries()} == {current_tf, new_cpu}


def test_a_copy_without_a_recorded_source_is_never_called_stale(cache: Path) -> None:
    # unpacked before sources were recorded, or the record could not be written
    assert not any(e.stale for e in cc.entries())
    cc.prune(stale_only=True)
    assert {p.name for p in cache.iterdir()} >= {A, B}


def test_unpacking_a_reconverted_sif_points_at_prune_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HVD_CONTAINER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cc, "_unpack_sif", lambda sif, target: (target / "etc").mkdir(parents=True))
    sif = tmp_path / "cpu.sif"
    assert cc.prepare_image(str(_sif(sif, 1))).warnings == ()
    assert cc.prepare_image(str(sif)).warnings == ()  # reused: nothing new
    assert cc.prepare_image(str(_sif(tmp_path / "other.sif", 2))).warnings == ()  # another file
    (note,) = cc.prepare_image(str(_sif(sif, 3))).warnings
    assert note == (
        f"1 older unpacked copy of {sif} (converted again since) is still in {tmp_path / 'cache' / 'images'}: "
        "`hvd-container cache prune --stale` removes them"
    )


# --- deleting only what the tool made ----------------------------------------------------------


def _victim(root: Path) -> dict[Path, bytes]:
    """Someone's files where a hostile profile points the cache: names like the tool's too."""
    files = {
        root / "images" / A / "thesis.tex": b"chapter 1",
        root / "images" / f"{B}.env": b"PATH=/mine\n",
        root / "images" / "photos" / "cat.jpg": b"\xff\xd8",
        root / "notes.txt": b"keep me",
    }
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def _intact(files: dict[Path, bytes]) -> None:
    for path, data in files.items():
        assert path.read_bytes() == data, path


def test_a_profile_that_points_the_cache_at_someones_files_removes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HVD_CONTAINER_CACHE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    files = _victim(tmp_path / "home")
    profile = tmp_path / "hostile.yaml"
    profile.write_text(
        "name: hostile\nextends: local\nimages:\n  cache_dir: " + str(tmp_path / "home") + "\n"
    )
    assert main(["cache", "prune", "--site", str(profile)]) == 0
    out = capsys.readouterr().out
    assert "0 removed" in out and "left 3 other names" in out, out
    _intact(files)
    assert main(["cache", "list", "--site", str(profile), "--json"]) == 0
    assert result("cache-list", capsys.readouterr().out)["images"] == []


def test_hvd_container_cache_at_someones_files_removes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _victim(tmp_path / "home")
    monkeypatch.setenv("HVD_CONTAINER_CACHE", str(tmp_path / "home"))
    assert main(["cache", "prune", "--json"]) == 0
    record = result("cache-prune", capsys.readouterr().out)
    assert record["removed"] == [] and record["not_ours"] == 3
    _intact(files)


def test_links_planted_in_the_cache_are_never_followed(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _victim(tmp_path / "home")
    victim = tmp_path / "home" / "images"
    # a recorded image replaced by a link to someone's directory, and one to their file
    (cache / A / "etc" / "f").unlink()
    for path in sorted(cache.joinpath(A).rglob("*"), reverse=True):
        path.rmdir()
    cache.joinpath(A).rmdir()
    (cache / A).symlink_to(victim)
    (cache / f"{A}.env").unlink()
    (cache / f"{A}.env").symlink_to(victim / f"{B}.env")
    # a link inside a recorded image, to someone's directory
    (cache / B / "data").symlink_to(victim / "photos")
    # a name like the tool's that it never recorded, and a link named like one
    (cache / ("e" * 24)).mkdir()
    (cache / ("f" * 24)).symlink_to(victim)
    assert main(["cache", "prune", "--json"]) == 0
    record = result("cache-prune", capsys.readouterr().out)
    removed = sorted(Path(p).name for p in record["removed"])
    assert removed == [B, f"{B}.env", f"{C}.part-1-abababab"]
    assert (cache / A).is_symlink() and (cache / f"{A}.env").is_symlink()  # left, not followed
    assert (cache / ("e" * 24)).is_dir() and record["not_ours"] == 2
    _intact(files)


def test_a_records_directory_that_is_a_link_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _victim(tmp_path / "home")
    elsewhere = tmp_path / "records"
    elsewhere.mkdir()
    (elsewhere / A).touch()  # "A is ours", said from outside the cache
    (tmp_path / "home" / "images" / cc.RECORDS).symlink_to(elsewhere)
    monkeypatch.setenv("HVD_CONTAINER_CACHE", str(tmp_path / "home"))
    assert main(["cache", "prune", "--json"]) == 0
    assert result("cache-prune", capsys.readouterr().out)["removed"] == []
    _intact(files)


def test_a_pipe_planted_as_a_source_record_does_not_hang_list(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.mkfifo(_made(cache, f"{A}.source"))
    assert main(["cache", "list", "--json"]) == 0  # would block reading the pipe
    rows = {r["key"]: r for r in result("cache-list", capsys.readouterr().out)["images"]}
    assert rows[A]["source"] is None and rows[A]["stale"] is False
    assert main(["cache", "prune", "--json"]) == 0
    assert (cache / f"{A}.source").is_fifo()  # not the file the tool wrote: left as it is
