"""Durability helpers, written once for the whole project: fsync, and replace atomically.

A file's contents are durable only after the file is fsynced, and a rename only after
the directory holding it is. So replacing a file safely takes four steps, in this order:

1. write the new contents to a temporary file next to the target (same directory, so
   same filesystem, so the rename is atomic);
2. fsync the temporary file;
3. ``os.replace`` it over the target;
4. fsync the directory.

A crash at any point leaves the old file or the new one, never a mix, a truncated file
or an empty one. :func:`write_atomic` does this for contents in hand (the store's
checkpoint, a report, a pid file); :func:`replacing` for writers that want a path of
their own (pyarrow, matplotlib, a streamed download). Everything that replaces a file
in delaybridge goes through one of the two.

This module imports nothing from delaybridge, so every package may use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
"""errno values of a write that failed for want of space (disk full, quota)."""


def is_no_space(exc: BaseException) -> bool:
    """Did ``exc`` come from a write that found no room (ENOSPC, EDQUOT)?"""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


def pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset`` or raise (``pwrite`` may write less than asked:
    a disk that fills mid-write writes a prefix, then the next call raises ENOSPC)."""
    view = memoryview(data)
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)


def fsync_dir(directory: Path) -> None:
    """Make renames, creations and deletions in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Make the contents of ``path`` durable (whoever wrote them, through any descriptor)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def replacing(path: Path, *, suffix: str = ".tmp", unique: bool = False) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` durably.

    The block writes the temporary file by any means. If the block returns, the file
    is fsynced, renamed over ``path`` and the directory fsynced (steps 2-4 above); if
    it raises, the temporary file is deleted and ``path`` is left as it was.

    The temporary file is ``<name><suffix>`` next to ``path`` (a leftover from a crash
    is simply overwritten next time); ``unique=True`` makes a fresh name per call, for
    writers that may race on the same target from two processes (e.g. two fetches of
    one jar). ``suffix`` lets writers that infer the format from the file name (such as
    matplotlib) see the right extension.
    """
    if unique:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
        os.close(fd)
        tmp = Path(name)
    else:
        tmp = path.with_name(path.name + suffix)
    try:
        yield tmp
        fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8): temp, fsync, rename, fsync dir."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with replacing(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pwrite_all(fd, raw, 0)
        finally:
            os.close(fd)


def allocated_bytes(path: Path) -> int:
    """Bytes the filesystem allocated for ``path`` (sparse holes do not count)."""
    return os.stat(path).st_blocks * 512
