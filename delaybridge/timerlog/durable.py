"""Durability helpers, written once: fsync a file, fsync a directory, replace atomically.

A rename is durable only after the directory holding it is fsynced; a file's
contents only after the file is. ``write_atomic`` does both in the right order, so
a crash leaves either the old file or the new one, never a mix.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make renames, creations and deletions in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: write a temp file, fsync, rename, fsync the dir."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def allocated_bytes(path: Path) -> int:
    """Bytes the filesystem allocated for ``path`` (sparse holes do not count)."""
    return os.stat(path).st_blocks * 512
