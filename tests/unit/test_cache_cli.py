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


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HVD_CONTAINER_CACHE", str(tmp_path))
    base = tmp_path / "images"
    for key in ("aaa", "bbb"):
        (base / key / "etc").mkdir(parents=True)
        (base / key / "etc" / "f").write_bytes(b"x" * 1000)
        (base / f"{key}.env").write_text("A=1\n")
    old = base / "ccc.part-1-ab"  # an unpack whose process died two hours ago
    old.mkdir()
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    (base / "ddd.part-2-cd").mkdir()  # an unpack running now
    return base


def test_list_shows_sizes_and_unfinished_unpacks(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cache", "list", "--json"]) == 0
    record = result("cache-list", capsys.readouterr().out)
    by_key = {row["key"]: row for row in record["images"]}
    assert set(by_key) == {"aaa", "bbb", "ccc", "ddd"}
    assert by_key["aaa"]["bytes"] >= 1000 and not by_key["aaa"]["partial"]
    assert by_key["ccc"]["partial"] is True
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert "(unfinished unpack)" in out and out.rstrip().endswith(f"in {cache}")


def test_prune_keeps_what_is_asked_and_running_unpacks(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cc, "key_of", lambda image: "aaa")
    assert main(["cache", "prune", "--keep", "a.sif", "--json"]) == 0
    record = result("cache-prune", capsys.readouterr().out)
    assert sorted(Path(p).name for p in record["removed"]) == ["bbb", "bbb.env", "ccc.part-1-ab"]
    assert sorted(p.name for p in cache.iterdir()) == ["aaa", "aaa.env", "ddd.part-2-cd"]


def test_keep_must_be_a_sif(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    assert main(["cache", "prune", "--keep", str(other)]) == 2
    assert "not a SIF file (only SIFs are unpacked into the cache)" in capsys.readouterr().err
    assert (cache / "bbb").is_dir()  # nothing removed on bad input


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
    assert {p.name for p in cache.iterdir()} >= {"aaa", "bbb"}


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
