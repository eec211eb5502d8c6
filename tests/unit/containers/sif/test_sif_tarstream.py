"""The tar filter feeding tar2sqfs: passthrough, drop, clamp, append."""

from __future__ import annotations

import io
import tarfile

import pytest
from hvd_container.containers.sif.metadata import ImageConfig, is_replaced, singularity_tar
from hvd_container.containers.sif.tarstream import (
    IterStream,
    TarFormatError,
    filter_tar,
    tar_entries,
)

LONG = "usr/lib/" + "x" * 150 + "/file.py"


def make_tar(fmt: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:

        def add(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, **kw: object) -> None:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.size = len(data)
            info.mtime = kw.get("mtime", 1000)  # type: ignore[assignment]
            info.mode = 0o644
            info.linkname = kw.get("linkname", "")  # type: ignore[assignment]
            if "pax" in kw:
                info.pax_headers = kw["pax"]  # type: ignore[assignment]
            tar.addfile(info, io.BytesIO(data))

        add("etc", kind=tarfile.DIRTYPE)
        add("etc/hosts", b"", mtime=2_000_000_000)
        add("etc/motd", b"hello\n" * 200)
        add(LONG, b"print(1)\n")
        add(".singularity.d", kind=tarfile.DIRTYPE)
        add(".singularity.d/runscript", b"#!/bin/sh\nold\n")
        add("singularity", kind=tarfile.SYMTYPE, linkname=".singularity.d/runscript")
        add("etc/motd2", kind=tarfile.LNKTYPE, linkname="etc/motd")
        if fmt == tarfile.PAX_FORMAT:
            add("etc/xattr", b"x", pax={"SCHILY.xattr.user.k": "v", "mtime": "2000000000.5"})
    return buf.getvalue()


def run_filter(data: bytes, chunk: int = 777, **kw: object) -> bytes:
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    out = io.BytesIO()
    src = io.BufferedReader(IterStream(chunks))
    filter_tar(src, out, drop=kw.get("drop", is_replaced), append=kw.get("append", b""),  # type: ignore[arg-type]
               clamp_mtime=kw.get("clamp"))  # type: ignore[arg-type]  # fmt: skip
    return out.getvalue()


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_kept_entries_pass_unchanged_and_replaced_ones_go(fmt: int) -> None:
    source = make_tar(fmt)
    result = run_filter(source, drop=is_replaced)
    with tarfile.open(fileobj=io.BytesIO(result)) as tar:
        names = tar.getnames()
        assert LONG in names
        assert ".singularity.d/runscript" not in names
        assert "singularity" not in names
        assert tar.extractfile("etc/motd").read() == b"hello\n" * 200  # type: ignore[union-attr]
        assert tar.getmember("etc/motd2").islnk()
        assert tar.getmember("etc/hosts").mtime == 2_000_000_000


def test_clamp_mtime_rewrites_ustar_and_pax_times() -> None:
    result = run_filter(make_tar(tarfile.PAX_FORMAT), clamp=1_700_000_000)
    with tarfile.open(fileobj=io.BytesIO(result)) as tar:
        assert tar.getmember("etc/hosts").mtime == 1_700_000_000
        assert tar.getmember("etc/motd").mtime == 1000
        xattr = tar.getmember("etc/xattr")
        assert xattr.mtime == 1_700_000_000
        assert xattr.pax_headers["SCHILY.xattr.user.k"] == "v"


def test_appended_entries_come_before_the_end_marker() -> None:
    extra = singularity_tar(ImageConfig(cmd=("python",)), {"a": "b"}, mtime=42)
    result = run_filter(make_tar(tarfile.GNU_FORMAT), append=extra)
    assert result.endswith(bytes(1024))
    with tarfile.open(fileobj=io.BytesIO(result)) as tar:
        runscript = tar.extractfile(".singularity.d/runscript").read()  # type: ignore[union-attr]
        assert b"set -- python" in runscript
        assert tar.getmember(".singularity.d/runscript").mode == 0o755
        assert tar.getmember("singularity").linkname == ".singularity.d/runscript"
        assert tar.getmember(".singularity.d/labels.json").mtime == 42
        assert tar.getnames().count(".singularity.d/runscript") == 1


def test_garbage_and_truncation_are_reported() -> None:
    with pytest.raises(TarFormatError, match="not a tar stream"):
        run_filter(b"\x01" * 1024)
    good = make_tar(tarfile.GNU_FORMAT)
    with pytest.raises(TarFormatError, match="ended"):
        run_filter(good[:1500])


def test_tar_entries_sizes_and_padding() -> None:
    info = tarfile.TarInfo("a")
    raw = tar_entries([(info, b"abc")])
    assert len(raw) % 512 == 0
    with tarfile.open(fileobj=io.BytesIO(raw + bytes(1024))) as tar:
        assert tar.extractfile("a").read() == b"abc"  # type: ignore[union-attr]


def one_file_pax_tar(pax: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("etc/f")
        info.size = 3
        info.mtime = 1000
        info.pax_headers = pax
        tar.addfile(info, io.BytesIO(b"abc"))
    return buf.getvalue()


def crafted(pax: dict[str, str], good: bytes, bad: bytes) -> bytes:
    """A tar whose PAX record text `good` is replaced by `bad` (same length: offsets hold)."""
    assert len(good) == len(bad)
    data = one_file_pax_tar(pax)
    assert data.count(good) == 1
    return data.replace(good, bad)


@pytest.mark.parametrize(
    ("data", "clamp", "message"),
    [
        (crafted({"comment": "hi"}, b"14 comment=hi\n", b"1x comment=hi\n"), None, "no length"),
        (crafted({"comment": "hi"}, b"14 comment=hi\n", b"99 comment=hi\n"), None, "length 99"),
        (crafted({"comment": "hi"}, b"14 comment=hi\n", b"14 comment hi\n"), None, "key=value"),
        (crafted({"comment": "hi"}, b"14 comment=hi\n", b"14 comment=hi "), None, "length 14"),
        (crafted({"mtime": "1000.5"}, b"mtime=1000.5", b"mtime=10x0.5"), 5, "bad PAX mtime"),
        (crafted({"size": "3"}, b"size=3", b"size=x"), None, "bad PAX size"),
        (crafted({"size": "33"}, b"size=33", b"size=-3"), None, "negative PAX size"),
    ],
    ids=["length", "too-long", "no-equals", "no-newline", "mtime", "size", "negative-size"],
)
def test_malformed_pax_headers_are_tar_format_errors(
    data: bytes, clamp: int | None, message: str
) -> None:
    # TarFormatError is what the SIF writer turns into a one-line error; a plain ValueError
    # would escape it as a traceback.
    with pytest.raises(TarFormatError, match=message) as exc:
        run_filter(data, clamp=clamp)
    assert type(exc.value) is TarFormatError
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("start", "field"), [(124, b"00000x00003\0"), (136, b"0000000017z\0")], ids=["size", "mtime"]
)
def test_bad_octal_header_fields_are_tar_format_errors(start: int, field: bytes) -> None:
    data = bytearray(make_tar(tarfile.GNU_FORMAT))
    data[start : start + 12] = field  # the first entry's size or mtime field
    with pytest.raises(TarFormatError, match="bad octal number") as exc:
        run_filter(bytes(data), clamp=10)
    assert type(exc.value) is TarFormatError
