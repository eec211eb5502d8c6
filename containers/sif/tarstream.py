"""Pass a tar stream through unchanged except: drop some entries, clamp times, append entries.

The bytes of kept entries are copied as they are (no re-encoding through tarfile), so
ownership, modes, xattrs, hard links and long names reach tar2sqfs exactly as Docker wrote
them. Only mtimes newer than SOURCE_DATE_EPOCH are clamped (Docker stamps /etc/hosts and
friends with the container's creation time), which keeps converted images reproducible.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, Protocol

BLOCK = 512
_COPY_CHUNK = 1024 * 1024
_EXTENDED = {b"x", b"g", b"L", b"K"}
_TIME_KEYS = {b"mtime", b"atime", b"ctime"}


class Writer(Protocol):
    def write(self, data: bytes, /) -> object: ...


class TarFormatError(ValueError):
    """The input is not a tar stream this filter understands."""


class IterStream(io.RawIOBase):
    """A readable raw stream over an iterator of byte chunks (e.g. docker-py's export())."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._pending:
            try:
                self._pending = memoryview(next(self._chunks))
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def buffered(chunks: Iterable[bytes], size: int = 1024 * 1024) -> io.BufferedReader:
    """A buffered reader over byte chunks: small header reads do not touch the iterator."""
    return io.BufferedReader(IterStream(chunks), buffer_size=size)


def _number(field: bytes) -> int:
    if field and field[0] & 0x80:  # GNU base-256
        value = int.from_bytes(field[1:], "big")
        return value
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise TarFormatError(f"bad octal number {text[:20]!r} in a tar header") from None


def _checksum(header: bytearray) -> None:
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)


def _clamp_header(header: bytearray, epoch: int) -> None:
    if header[136] & 0x80 or _number(bytes(header[136:148])) > epoch:
        header[136:148] = b"%011o\0" % epoch
        _checksum(header)


def _parse_pax(data: bytes) -> list[tuple[bytes, bytes]]:
    """`LEN key=value\n` records; TarFormatError for anything else (never loops forever)."""
    records = []
    pos = 0
    while pos < len(data) and data[pos] != 0:
        space = data.find(b" ", pos)
        digits = data[pos:space]
        if space < 0 or not digits.isdigit():
            raise TarFormatError(f"bad PAX header record at byte {pos}: no length")
        length = int(digits)
        end = pos + length
        if end <= space + 1 or end > len(data) or data[end - 1 : end] != b"\n":
            raise TarFormatError(f"bad PAX header record at byte {pos}: length {length}")
        key, sep, value = data[space + 1 : end - 1].partition(b"=")
        if not sep or not key:
            raise TarFormatError(f"bad PAX header record at byte {pos}: no key=value")
        records.append((key, value))
        pos = end
    return records


def _pax_number(key: bytes, value: bytes, kind: type[int] | type[float] = int) -> float:
    try:
        number = kind(value)
    except ValueError:
        raise TarFormatError(
            f"bad PAX {key.decode(errors='replace')} value {value[:20]!r}"
        ) from None
    if number < 0:
        raise TarFormatError(f"negative PAX {key.decode(errors='replace')} value {value[:20]!r}")
    return number


def _pax_record(key: bytes, value: bytes) -> bytes:
    payload = b" " + key + b"=" + value + b"\n"
    length = len(payload) + 1
    while len(b"%d" % length) + len(payload) != length:
        length += 1
    return b"%d" % length + payload


def _clamp_pax(header: bytearray, data: bytes, epoch: int) -> tuple[bytearray, bytes]:
    records = _parse_pax(data)
    changed = False
    for i, (key, value) in enumerate(records):
        if key in _TIME_KEYS and _pax_number(key, value, float) > epoch:
            records[i] = (key, b"%d" % epoch)
            changed = True
    if not changed:
        return header, data
    new = b"".join(_pax_record(k, v) for k, v in records)
    header[124:136] = b"%011o\0" % len(new)
    _clamp_header(header, epoch)
    _checksum(header)
    return header, new


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def _read_exact(src: BinaryIO, n: int) -> bytes:
    data = src.read(n)
    if len(data) != n:
        raise TarFormatError(f"tar stream ended early (wanted {n} bytes, got {len(data)})")
    return data


def _copy(src: BinaryIO, out: Writer | None, n: int) -> None:
    while n:
        chunk = src.read(min(n, _COPY_CHUNK))
        if not chunk:
            raise TarFormatError("tar stream ended inside a file's data")
        if out is not None:
            out.write(chunk)
        n -= len(chunk)


def normalize(name: str) -> str:
    """Entry name without leading './' or '/' and trailing '/'."""
    while name.startswith("./"):
        name = name[2:]
    return name.strip("/")


def filter_tar(
    src: BinaryIO,
    out: Writer,
    *,
    drop: Callable[[str], bool],
    append: bytes,
    clamp_mtime: int | None = None,
) -> int:
    """Copy the tar in src to out, dropping entries for which drop(name) is true, clamping
    mtimes to clamp_mtime, and appending the raw entries in `append` (no end marker) before
    the end-of-archive marker. Returns the number of entries kept."""
    kept = 0
    pending: list[bytes] = []
    long_name: str | None = None
    pax_path: str | None = None
    pax_size: int | None = None
    while True:
        block = src.read(BLOCK)
        if not block or block == bytes(BLOCK):
            break
        if len(block) != BLOCK:
            raise TarFormatError("tar stream ended inside a header")
        header = bytearray(block)
        if bytes(header[257:262]) not in (b"ustar", b"\0\0\0\0\0"):
            raise TarFormatError("not a tar stream (no ustar header)")
        typeflag = bytes(header[156:157])
        size = _number(bytes(header[124:136]))
        if typeflag in _EXTENDED:
            data = _read_exact(src, _padded(size))[:size]
            if typeflag == b"x":
                records = dict(_parse_pax(data))
                if b"path" in records:
                    pax_path = records[b"path"].decode(errors="surrogateescape")
                if b"size" in records:
                    pax_size = int(_pax_number(b"size", records[b"size"]))
                if clamp_mtime is not None:
                    header, data = _clamp_pax(header, data, clamp_mtime)
            elif typeflag == b"L":
                long_name = data.split(b"\0", 1)[0].decode(errors="surrogateescape")
            pending.append(bytes(header) + data + bytes(_padded(len(data)) - len(data)))
            continue
        if pax_size is not None:
            size = pax_size
        if pax_path is not None:
            name = pax_path
        elif long_name is not None:
            name = long_name
        else:
            prefix = header[345:500].split(b"\0", 1)[0]
            base = header[0:100].split(b"\0", 1)[0]
            name = (prefix + b"/" + base if prefix else base).decode(errors="surrogateescape")
        # Hard links, symlinks, directories and devices carry no data even if size says so.
        data_size = size if typeflag in (b"0", b"\0", b"7") else 0
        if drop(normalize(name)):
            _copy(src, None, _padded(data_size))
        else:
            if clamp_mtime is not None:
                _clamp_header(header, clamp_mtime)
            for ext in pending:
                out.write(ext)
            out.write(bytes(header))
            _copy(src, out, _padded(data_size))
            kept += 1
        pending, long_name, pax_path, pax_size = [], None, None, None
    out.write(append)
    out.write(bytes(2 * BLOCK))
    return kept


def tar_entries(members: Iterable[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    """Raw tar entries (PAX format, no end marker) for the given members and their data."""
    buf = bytearray()
    for info, data in members:
        info.size = len(data) if info.isreg() else 0
        buf += info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        if info.isreg():
            buf += data + bytes(_padded(len(data)) - len(data))
    return bytes(buf)
