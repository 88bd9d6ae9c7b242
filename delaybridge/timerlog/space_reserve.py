"""A little disk space each store keeps back, so that a full volume never stops a flush.

A store gives back the space of what it delivered only after a checkpoint that no
longer needs it is on disk (:mod:`reclaim`), and a checkpoint is a new file, written
with the cancel log's pending records before it. On a volume filled to its last block
-- ingest running with ``store.min_free_bytes: 0``, or something else filling the disk
-- that write fails (ENOSPC), the flush fails, and the store would wait for space that
only it could free. So each store keeps :data:`RESERVE_BYTES` allocated in
``<store>/reserve``: a flush that finds no room releases it and tries again (the
checkpoint, then giving space back, then more room than the reserve), and a later flush
with room takes it back.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from delaybridge.durable import is_no_space
from delaybridge.file_space import reserve

RESERVE_BYTES = 32 * 1024
"""Enough for a checkpoint and a burst of cancel-log records (~40 bytes each)."""
FILE_NAME = "reserve"
log = logging.getLogger(__name__)


class SpaceReserve:
    """``<store>/reserve``: :data:`RESERVE_BYTES` allocated, released when a flush needs it."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME
        self.held = False

    def take(self) -> bool:
        """Allocate the reserve (again); False, with nothing left behind, if the volume
        has no room for it now (a later flush tries again)."""
        if self.held:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            reserve(fd, 0, RESERVE_BYTES)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            self.path.unlink(missing_ok=True)
            return False
        finally:
            os.close(fd)
        self.held = True
        return True

    def release(self) -> bool:
        """Give the reserve's room to the volume; False if it was not held."""
        if not self.held:
            return False
        self.path.unlink(missing_ok=True)
        self.held = False
        log.warning(
            "%s: the volume is full; the store's reserve of %d bytes is released so that "
            "it can checkpoint and give back what it delivered",
            self.path.parent,
            RESERVE_BYTES,
        )
        return True
