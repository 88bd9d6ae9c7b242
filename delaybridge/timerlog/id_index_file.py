"""One timer-log segment's id-index file: a fixed-size slot per sorted run of its entries.

``<base:020d>.tidx`` sits beside the segment ``<base:020d>.tlog`` it indexes (``base``:
the segment's first byte position in the log) and is deleted with it. The segment's
entries are cut into *runs* of ``run_entries`` (the last run of a segment may be
shorter); a run that is whole gets its slot written once, never changed::

    file:  64-byte FileHeader (kind DBTI, entry_size 6, base = the segment's base,
           stamp = run_entries), then one slot per run, back to back
    slot:  offset           size              field
           0                4 * run_entries   id_hash u32, ascending
           4 * run_entries  2 * run_entries   row u16: the entry's index minus the run's
           6 * run_entries  4                 count: entries in the run
                            4                 magic b"TIDX"
                            8                 first: index of the run's first entry

Nothing is fsynced and nothing is trusted on open: :meth:`IndexFile.verified` checks a
slot against the timer-log entries it claims to sort (see :mod:`id_index`), so a torn,
zeroed or stale slot is rebuilt, never used. 6 bytes per entry on disk (sparse file:
slots never written take no blocks).

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt

from delaybridge.durable import pwrite_all
from delaybridge.errors import IntegrityError
from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind

TRAILER = struct.Struct("<I4sq")  # count, magic, first
MAGIC = b"TIDX"
ENTRY_BYTES = 6  # id_hash u32 + row u16
U32 = npt.NDArray[np.uint32]
U16 = npt.NDArray[np.uint16]


def slot_bytes(run_entries: int) -> int:
    return run_entries * ENTRY_BYTES + TRAILER.size


class IndexFile:
    """The open ``.tidx`` file of one segment, mapped read-only, written with pwrite."""

    def __init__(self, path: Path, fd: int, base: int, run_entries: int, slots: int) -> None:
        self.path = path
        self.fd = fd
        self.base = base
        self.run_entries = run_entries
        self.slots = slots
        self.mm = mmap.mmap(
            fd, HEADER_SIZE + slots * slot_bytes(run_entries), mmap.MAP_SHARED, mmap.PROT_READ
        )

    @staticmethod
    def size(run_entries: int, slots: int) -> int:
        return HEADER_SIZE + slots * slot_bytes(run_entries)

    @classmethod
    def create(cls, path: Path, base: int, run_entries: int, slots: int) -> IndexFile:
        """A new empty (sparse) file, replacing any file of that name."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            header = FileHeader(FileKind.TIMER_INDEX, ENTRY_BYTES, base, stamp=run_entries)
            pwrite_all(fd, header.encode(), 0)
            os.ftruncate(fd, cls.size(run_entries, slots))
            return cls(path, fd, base, run_entries, slots)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise

    @classmethod
    def adopt(cls, path: Path, base: int, run_entries: int, slots: int) -> IndexFile | None:
        """The file on disk if its header and size fit this segment and run size, else
        None (the caller deletes it; its runs are rebuilt)."""
        fd = os.open(path, os.O_RDWR)
        try:
            header = FileHeader.decode(os.pread(fd, HEADER_SIZE, 0), path, FileKind.TIMER_INDEX)
            fits = (header.base, header.stamp, header.entry_size) == (
                base,
                run_entries,
                ENTRY_BYTES,
            ) and os.fstat(fd).st_size == cls.size(run_entries, slots)
            if fits:
                return cls(path, fd, base, run_entries, slots)
        except (IntegrityError, OSError):
            pass
        os.close(fd)
        return None

    def _offset(self, slot: int) -> int:
        return HEADER_SIZE + slot * slot_bytes(self.run_entries)

    def claimed(self, slot: int, first: int, count: int) -> tuple[U32, U16] | None:
        """The slot's (hashes, rows) if its trailer says it holds run ``first`` of
        ``count`` entries (views into the map: not yet verified), else None.

        The trailer is read with ``pread``, not through the map: a slot never written is
        a hole of this sparse file, and on a full tmpfs reading a hole through a map
        dies of SIGBUS (:mod:`delaybridge.file_space`). A trailer is written last, by the
        same ``pwrite`` as the rest of its slot, so a slot that has one has no hole."""
        off = self._offset(slot)
        r = self.run_entries
        raw = os.pread(self.fd, TRAILER.size, off + r * ENTRY_BYTES)
        if len(raw) < TRAILER.size:
            return None
        have = TRAILER.unpack(raw)
        if have != (count, MAGIC, first):
            return None
        return self.run(slot, count)

    def run(self, slot: int, count: int) -> tuple[U32, U16]:
        """Views of a slot's first ``count`` hashes and rows (valid while the file is open)."""
        off = self._offset(slot)
        hashes = np.frombuffer(self.mm, np.uint32, count, off)
        rows = np.frombuffer(self.mm, np.uint16, count, off + 4 * self.run_entries)
        return hashes, rows

    def write(self, slot: int, first: int, hashes: U32, rows: U16) -> None:
        r = self.run_entries
        body = bytearray(slot_bytes(r))
        n = len(hashes)
        body[: 4 * n] = hashes.astype("<u4").tobytes()
        body[4 * r : 4 * r + 2 * n] = rows.astype("<u2").tobytes()
        TRAILER.pack_into(body, r * ENTRY_BYTES, n, MAGIC, first)
        pwrite_all(self.fd, memoryview(body), self._offset(slot))

    def release_pages(self) -> None:
        self.mm.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        try:
            self.mm.close()
        finally:
            os.close(self.fd)
