"""The commit log: the sidecar's own copy of every accepted message.

Records are in :mod:`commit_record` (decoded through :mod:`commit_codec`); files are a
:class:`SegmentedLog` in ``<store>/commitlog/``. A batch is encoded record by record (one
``pack`` and one ``crc32`` each), joined, and written with one ``pwrite``. Reads go
through the segment's mmap and check the CRC before decoding. Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from delaybridge.fileformat import HEADER_SIZE, FileKind
from delaybridge.timerlog import commit_codec
from delaybridge.timerlog.commit_record import check
from delaybridge.timerlog.records import TimerRecord
from delaybridge.timerlog.segments import SegmentedLog

RELEASE_EVERY_RECORDS = 1 << 18  # ~64 MiB of 250-byte records


class CommitLog:
    """Segmented commit log."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.log = SegmentedLog(directory, FileKind.COMMIT_LOG, "clog", 0, segment_bytes)
        self._read_since_release = 0

    def open(self, end: int) -> None:
        self.log.open(end)

    @property
    def end(self) -> int:
        return self.log.end

    def append_encoded(
        self, parts: Sequence[bytes | memoryview], sizes: Sequence[int]
    ) -> npt.NDArray[np.int64]:
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
        length = check(mm, off, len(mm), seg.path, off)
        return mm[off : off + length]

    def read(self, pos: int) -> TimerRecord:
        """The checked, decoded record at ``pos``."""
        seg, off = self.log.locate(pos)
        return commit_codec.decode(seg.map(), off, seg.path)

    def read_many(self, positions: npt.NDArray[np.int64]) -> list[TimerRecord]:
        """The checked, decoded records at ``positions``, in that order (delivery's path)."""
        if len(positions) == 0:
            return []
        bases = np.asarray(self.log._bases, dtype=np.int64)
        segs = np.searchsorted(bases, positions, side="right") - 1
        if int(segs.min()) < 0 or int(positions.max()) >= self.log.end:
            bad = positions[(segs < 0) | (positions >= self.log.end)][0]
            self.log.locate(int(bad))  # raises, naming the log and the position
        segments = self.log.segments
        maps = [s.map() for s in segments]
        paths = [s.path for s in segments]
        offsets = positions - bases[segs] + HEADER_SIZE
        out = commit_codec.decode_many(maps, paths, segs.tolist(), offsets.tolist())
        # Mapped pages count in RSS: let them go every ~64 MiB of records read.
        self._read_since_release += len(out)
        if self._read_since_release >= RELEASE_EVERY_RECORDS:
            self._read_since_release = 0
            self.log.release_pages()
        return out

    def verify(self, positions: npt.NDArray[np.int64]) -> int:
        """Check the record at each of ``positions``; returns how many. For ``inspect``:
        the records of the messages not finished (a finished one may have been punched
        out, :mod:`reclaim`)."""
        n = 0
        for pos in positions.tolist():
            seg, off = self.log.locate(pos)
            i = self.log.segments.index(seg)
            check(seg.map(), off, off + self.log.segment_end(i) - pos, seg.path, off)
            n += 1
            if n % RELEASE_EVERY_RECORDS == 0:
                self.log.release_pages()
        self.log.release_pages()
        return n

    def sync(self) -> None:
        self.log.sync()

    def delete_before(self, pos: int) -> int:
        return self.log.delete_before(pos)

    def punch_before(self, pos: int) -> int:
        return self.log.punch_before(pos)

    def close(self) -> None:
        self.log.close()
