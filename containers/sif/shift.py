"""Make room at the front of a file without a second copy of it on disk.

The squashfs is written first (tar2sqfs cannot write at an offset); the SIF header then has
to go in front of it. FALLOC_FL_INSERT_RANGE (ext4, XFS) does that in place in no time;
elsewhere (tmpfs, overlayfs, NFS) the data is moved back-to-front in chunks inside the same
file, so the disk never holds more than the final SIF.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os

FALLOC_FL_INSERT_RANGE = 0x20
_CHUNK = 8 * 1024 * 1024


def _insert_range(fd: int, length: int) -> bool:
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    fallocate = libc.fallocate
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    if fallocate(fd, FALLOC_FL_INSERT_RANGE, 0, length) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ENOSPC:
        raise OSError(err, os.strerror(err))
    return False  # EOPNOTSUPP, EINVAL (length not a multiple of the block size), ...


def _move_back(fd: int, size: int, length: int) -> None:
    os.ftruncate(fd, size + length)
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        data = os.pread(fd, end - start, start)
        os.pwrite(fd, data, start + length)
        end = start


def insert_front(fd: int, length: int) -> str:
    """Shift the whole content of fd forward by length bytes; returns the method used."""
    size = os.fstat(fd).st_size
    if length == 0:
        return "none"
    if size > 0 and _insert_range(fd, length):
        return "insert-range"
    _move_back(fd, size, length)
    return "move"
