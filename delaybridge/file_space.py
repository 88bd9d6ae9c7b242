"""A file's space on its file system: reserved before a mapped write, given back as holes.

Files the store writes through a map, and files whose dead parts it gives back, need
three things from the file system that Python's ``os`` module has only in part:

- :func:`reserve` (``posix_fallocate``): blocks allocated for a range before anything is
  stored into it through a map. A store into a *hole* of a mapped file on a full file
  system cannot fail the way ``write(2)`` does (ENOSPC): the kernel kills the process
  with SIGBUS instead. Worse, on tmpfs even a *read* of a hole through a map allocates a
  page, and so dies of SIGBUS on a full tmpfs (both measured: tests/unit/test_file_space.py
  and tests/integration/timerlog/test_store_full_tmpfs.py). A range reserved first is
  never a hole: reading and writing it through the map cannot fail later, and a full
  disk shows up at the reservation, as an ordinary ``OSError`` (ENOSPC).
- :func:`punch_hole` (``fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)``, through
  ``ctypes``: ``os`` has no binding): the range's blocks go back to the file system, the
  file keeps its size and positions, and the range reads as zeros from then on. This is
  how a log segment gives back the space of what was delivered without waiting to be
  deleted whole. Linux's ext4, XFS, btrfs, tmpfs, F2FS and NFS 4.2 support it; elsewhere
  the call raises ``OSError`` with an errno in :data:`HOLES_UNSUPPORTED`, and the caller
  falls back to deleting whole files.
- :func:`data_ranges` (``lseek`` with ``SEEK_DATA`` / ``SEEK_HOLE``): where a file holds
  data, so that a reader that must not touch holes through a map (see above) knows
  where they are. A file system that cannot tell reports the whole file as data.

This module imports nothing from delaybridge, so every package may use it.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from collections.abc import Callable
from functools import cache

FALLOC_FL_KEEP_SIZE = 0x01
"""fallocate(2): do not change the file's size."""
FALLOC_FL_PUNCH_HOLE = 0x02
"""fallocate(2): deallocate the range (must be combined with KEEP_SIZE)."""
HOLES_UNSUPPORTED = (errno.EOPNOTSUPP, errno.ENOSYS)
"""errno values of :func:`punch_hole` on a file system (or a libc) that cannot punch."""


def reserve(fd: int, offset: int, length: int) -> None:
    """Allocate ``[offset, offset + length)`` of the file now (the file grows if the range
    ends past it). Raises OSError (ENOSPC on a full file system)."""
    if length > 0:
        os.posix_fallocate(fd, offset, length)


@cache
def _fallocate() -> Callable[[int, int, int, int], int] | None:
    """libc's ``fallocate``, or None where the C library has none."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        call = libc.fallocate
    except AttributeError:
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    call.restype = ctypes.c_int
    fallocate: Callable[[int, int, int, int], int] = call
    return fallocate


def punch_hole(fd: int, offset: int, length: int) -> None:
    """Give back the blocks of ``[offset, offset + length)``; it reads as zeros afterwards.

    Only whole blocks are deallocated (a partial block at either end is zeroed in
    place), so callers align the range to :func:`block_size`. Raises OSError: errno in
    :data:`HOLES_UNSUPPORTED` where the file system cannot punch holes."""
    if length <= 0:
        return
    call = _fallocate()
    if call is None:
        raise OSError(errno.ENOSYS, "fallocate is not available in this C library")
    if call(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"punching a hole of {length} bytes at {offset}: {os.strerror(code)}")


def data_ranges(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The ``[from, to)`` ranges of ``[start, end)`` that hold data (not holes), ascending.

    A file system without ``SEEK_DATA`` is taken to hold data everywhere."""
    out: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole from pos to the end
                break
            if exc.errno == errno.EINVAL:  # SEEK_DATA not supported: all data
                return [(start, end)]
            raise
        if data >= end:
            break
        hole = os.lseek(fd, data, os.SEEK_HOLE)
        out.append((data, min(hole, end)))
        pos = hole
    return out


def block_size(fd: int) -> int:
    """The unit :func:`punch_hole` frees space in: the file system's block size, at least
    a memory page (a hole smaller than a page frees nothing in the page cache)."""
    return max(mmap.PAGESIZE, os.fstat(fd).st_blksize)
