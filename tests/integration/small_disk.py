"""A real, small filesystem for disk-full tests: a tmpfs of a given size, and a filler.

Mounting needs root (the test machines and CI run as root); without it the test that
asks for one fails and says so. tmpfs counts space in pages: a file takes the pages it
was written to (a sparse file's holes take none), so :func:`fill` can leave an exact
number of pages free.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PAGE = 4096


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """``where`` (created) with a tmpfs of ``size`` (e.g. ``8m``) mounted on it."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, (
        f"this test mounts a {size} tmpfs and needs root (uid {os.getuid()}): {done.stderr}"
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill(directory: Path, leave_bytes: int, name: str = "filler") -> Path:
    """A file taking all free space of ``directory``'s filesystem but ``leave_bytes``
    (rounded down to whole pages)."""
    filler = directory / name
    size = shutil.disk_usage(directory).free - leave_bytes
    with filler.open("wb") as f:
        f.write(b"\0" * max(0, size // PAGE * PAGE))
    return filler
