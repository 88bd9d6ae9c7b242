"""The commit log: the sidecar's own copy of every accepted message.

Records are in :mod:`commit_codec`; files are a :class:`SegmentedLog` in
``<store>/commitlog/``. A batch is encoded record by record (one ``pack`` and one
``crc32`` each), joined, and written with one ``pwrite``. Reads go through the
segment's mmap and check the CRC before decoding. Not thread-safe.
"""

from __future__ import annotations

import bisect
import mmap
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from delaybridge.timerlog import commit_codec as codec
from delaybridge.timerlog.records import TimerRecord
from delaybridge.timerlog.segments import SegmentedLog
from delaybridge.wheel.file_header import HEADER_SIZE, FileKind

unpack_prefix = codec.PREFIX.unpack_from
crc32 = zlib.crc32

DUE_OFFSET = codec.PREFIX.size + 8  # due_ms inside a record, for rolls
SOURCE_OFFSET_OFFSET = DUE_OFFSET + 8


class CommitLog:
    """Segmented commit log."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.log = SegmentedLog(directory, FileKind.COMMIT_LOG, "clog", 0, segment_bytes)
        self._lo = self._hi = self._delta = 0
        self._mm: mmap.mmap | bytes = b""
        self._path = directory

    def open(self, end: int) -> None:
        self.log.open(end)

    @property
    def end(self) -> int:
        return self.log.end

    def append_encoded(self, parts: list[bytes], sizes: Sequence[int]) -> npt.NDArray[np.int64]:
        """Write already-encoded records; returns each record's position."""
        start = self.log.append(b"".join(parts))
        positions = np.empty(len(sizes), dtype=np.int64)
        positions[0] = start
        if len(sizes) > 1:
            np.cumsum(np.asarray(sizes[:-1], dtype=np.int64), out=positions[1:])
            positions[1:] += start
        return positions

    def raw(self, pos: int) -> bytes:
        """The whole checked record at ``pos`` (prefix included), for a roll's copy."""
        seg, off = self.log.locate(pos)
        mm = seg.map()
        length = codec.check(mm, off, len(mm), seg.path, off)
        return mm[off : off + length]

    def read(self, pos: int) -> TimerRecord:
        """The checked, decoded record at ``pos`` (the hot path of delivery)."""
        if not self._lo <= pos < self._hi:  # another segment (reads jump around by due time)
            i = bisect.bisect_right(self.log._bases, pos) - 1
            if i < 0 or pos >= self.log.end:
                self.log.locate(pos)  # raises, naming the log and the position
            seg = self.log.segments[i]
            self._lo, self._hi = seg.base, self.log.segment_end(i)
            self._mm, self._delta, self._path = seg.map(), seg.base - HEADER_SIZE, seg.path
        mm = self._mm
        off = pos - self._delta
        length, crc = unpack_prefix(mm, off)
        body = mm[off + 8 : off + length]
        if crc32(body) != crc or length < codec.FIXED_SIZE:
            codec.check(mm, off, len(mm), self._path, off)  # raises with the detail
        return codec.decode(body, self._path, off)

    def forget_maps(self) -> None:
        """Segments were added or deleted: drop the cached reading position."""
        self._lo = self._hi = 0

    def verify(self, start: int, stop: int) -> int:
        """Check every record in ``[start, stop)``; returns how many. For ``inspect``."""
        pos, n = start, 0
        while pos < stop:
            seg, off = self.log.locate(pos)
            mm = seg.map()
            i = self.log.segments.index(seg)
            limit = off + self.log.segment_end(i) - pos
            while pos < stop and off < limit:
                length = codec.check(mm, off, limit, seg.path, off)
                off += length
                pos += length
                n += 1
            self.log.release_pages()
        return n

    def sync(self) -> None:
        self.log.sync()

    def delete_before(self, pos: int) -> int:
        self.forget_maps()
        return self.log.delete_before(pos)

    def close(self) -> None:
        self.log.close()
