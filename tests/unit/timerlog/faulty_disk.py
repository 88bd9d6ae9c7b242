"""A disk that fills up at a chosen write: the fault-injecting file layer of the store tests.

Every way the store puts bytes on disk goes through ``os.pwrite`` or
``os.posix_fallocate`` (the logs, the cancel log, the checkpoint's temporary file, the
wheel's header and the reservation of its pages; the wheel's slots are written through
a map of reserved pages, which needs no new space). :class:`FaultyDisk` replaces both: the
``fail_at``-th call writes half its bytes (a disk filling mid-write), and every call
after it raises ENOSPC until :meth:`FaultyDisk.free` -- as a full filesystem does.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


class FaultyDisk:
    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at = fail_at
        self.calls = 0
        self.full = False
        self.refused = 0
        self._pwrite = os.pwrite
        self._fallocate = os.posix_fallocate

    def free(self) -> None:
        """Space is back: writes succeed again (and no new failure is armed)."""
        self.full = False
        self.fail_at = None

    def _next(self) -> bool:
        """Count a write; True if it must fail (the disk is full from now on)."""
        self.calls += 1
        if self.calls == self.fail_at:
            self.full = True
            return True
        return False

    def _refuse(self) -> None:
        self.refused += 1
        raise OSError(errno.ENOSPC, "No space left on device (injected)")

    def pwrite(self, fd: int, data: Any, offset: int) -> int:
        if self.full:
            self._refuse()
        if self._next() and len(data) > 1:
            return self._pwrite(fd, memoryview(data)[: len(data) // 2], offset)
        if self.full:
            self._refuse()
        return self._pwrite(fd, data, offset)

    def posix_fallocate(self, fd: int, offset: int, length: int) -> None:
        if self.full or self._next():
            self._refuse()
        self._fallocate(fd, offset, length)

    @contextmanager
    def installed(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultyDisk]:
        with monkeypatch.context() as m:
            m.setattr(os, "pwrite", self.pwrite)
            m.setattr(os, "posix_fallocate", self.posix_fallocate)
            yield self
