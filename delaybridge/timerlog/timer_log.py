"""The timer log: 32-byte entries, appended per batch, read by index or in chunks.

Entry formats are in :mod:`timer_codec`; files are a :class:`SegmentedLog` whose
positions are ``index * 32``; :mod:`id_index` finds entries by id hash (sorted runs in
``.tidx`` files beside the segments). Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import bisect
import mmap
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from delaybridge.errors import IntegrityError
from delaybridge.fileformat import HEADER_SIZE, FileKind
from delaybridge.timerlog import timer_codec as codec
from delaybridge.timerlog.id_index import IdIndex
from delaybridge.timerlog.segments import SegmentedLog

ENTRY = codec.ENTRY_SIZE
I64 = npt.NDArray[np.int64]
CHUNK_ENTRIES = 1 << 18  # 8 MiB per vectorised pass
NO_ROWS = np.empty(0, dtype=np.intp)


class IdHit(NamedTuple):
    """A live entry whose id hash matched (confirm it on its commit-log record)."""

    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose
    slot_ms: int
    cl_pos: int


class TimerLog:
    """Segmented timer log in ``<store>/timerlog/``."""

    def __init__(
        self, directory: Path, entries_per_segment: int, run_entries: int = 1 << 16
    ) -> None:
        self.log = SegmentedLog(
            directory, FileKind.TIMER_LOG, "tlog", ENTRY, entries_per_segment * ENTRY
        )
        self.index = IdIndex(self.log, run_entries)

    def open(self, end_index: int) -> None:
        """Cut the log back to ``end_index``; adopt the index files of its segments (their
        runs are checked by :meth:`load_index`, or by the first :meth:`find_ids`)."""
        self.log.open(end_index * ENTRY)
        self.index.open()

    def load_index(self, live_start: int) -> None:
        """Verify (or rebuild) the id index from ``live_start``: recovery's last step."""
        self.index.load(live_start)
        self.log.release_pages()

    @property
    def end(self) -> int:
        """Index the next entry will get."""
        return self.log.end // ENTRY

    @property
    def start(self) -> int:
        return self.log.start // ENTRY

    def append(self, entries: codec.Entries) -> int:
        """Write a batch of entries with one syscall; returns the first one's index."""
        return self.log.append(entries.tobytes()) // ENTRY

    def entry(self, index: int) -> codec.TimerEntry:
        """One entry, CRC checked."""
        seg, offset = self.log.locate(index * ENTRY)
        return codec.decode_one(seg.map(), offset, seg.path, index)

    def chase(self, last: int, count: int) -> tuple[array[int], array[int], array[int]]:
        """A slot's list, oldest first: (indexes, commit-log positions, entry types).

        The list is threaded backwards (each entry knows its predecessor), so it is
        collected whole before it can be read in arrival order: 17 bytes per entry in
        compact arrays, never the messages themselves. Every entry's CRC is checked.
        """
        idx: array[int] = array("q")
        cls: array[int] = array("q")
        kinds: array[int] = array("b")
        add_idx, add_cl, add_kind = idx.append, cls.append, kinds.append
        segs = self.log.segments
        bases = [s.base for s in segs]
        lo = hi = 0
        mm: mmap.mmap | None = None
        path = self.log.directory
        unpack = codec.ENTRY.unpack_from
        crc32 = zlib.crc32
        mask, shift = codec.POS_MASK, codec.TYPE_SHIFT
        index = last
        for i in range(count - 1, -1, -1):
            pos = index * ENTRY
            if not lo <= pos < hi or mm is None:
                seg_i = bisect.bisect_right(bases, pos) - 1
                if index < 0 or seg_i < 0 or pos >= self.log.end:
                    raise IntegrityError(
                        f"{self.log.directory}: slot list of {count} entries points to entry "
                        f"{index} outside the log at its entry {i}"
                    )
                lo, hi = bases[seg_i], self.log.segment_end(seg_i)
                mm = segs[seg_i].map()
                path = segs[seg_i].path
            off = HEADER_SIZE + pos - lo
            crc, _, prev, _, word = unpack(mm, off)
            if crc32(mm[off + 4 : off + ENTRY]) != crc:
                raise IntegrityError(f"{path}: offset {off}: timer-log entry {index} CRC mismatch")
            add_idx(index)
            add_cl(word & mask)
            add_kind(word >> shift)
            index = prev
        idx.reverse()
        cls.reverse()
        kinds.reverse()
        return idx, cls, kinds

    def read(self, start: int, stop: int) -> codec.Entries:
        """Entries ``[start, stop)`` as a structured array (a copy, may span segments)."""
        parts = []
        pos, end = start * ENTRY, stop * ENTRY
        while pos < end:
            seg, off = self.log.locate(pos)
            seg_i = self.log.segments.index(seg)
            take = min(end, self.log.segment_end(seg_i)) - pos
            parts.append(
                np.frombuffer(seg.map(), dtype=codec.DTYPE, count=take // ENTRY, offset=off).copy()
            )
            pos += take
        if not parts:
            return np.empty(0, dtype=codec.DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def gather(self, indexes: I64) -> codec.Entries:
        """Entries at arbitrary ``indexes`` (vectorised per segment), CRC checked."""
        out = self._take(indexes)
        bad_rows = codec.bad_rows(out)
        if len(bad_rows):
            index = int(indexes[bad_rows[0]])
            seg, off = self.log.locate(index * ENTRY)
            raise IntegrityError(f"{seg.path}: offset {off}: timer-log entry {index} CRC mismatch")
        return out

    def _take(self, indexes: I64) -> codec.Entries:
        """Entries at ``indexes``, not CRC checked."""
        bases = np.asarray(self.log._bases, dtype=np.int64) // ENTRY
        seg_of = np.searchsorted(bases, indexes, side="right") - 1
        if len(indexes) and (int(indexes.min()) < self.start or int(indexes.max()) >= self.end):
            bad = indexes[(indexes < self.start) | (indexes >= self.end)][0]
            raise IntegrityError(
                f"{self.log.directory}: a slot list points to entry {bad}, "
                f"outside the log [{self.start}, {self.end})"
            )
        out = np.empty(len(indexes), dtype=codec.DTYPE)
        for s in np.unique(seg_of):
            seg = self.log.segments[int(s)]
            rows = seg_of == s
            table = np.frombuffer(
                seg.map(), dtype=codec.DTYPE, offset=HEADER_SIZE, count=seg.capacity // ENTRY
            )
            out[rows] = table[indexes[rows] - bases[s]]
        return out

    def chunks(
        self, start: int, stop: int, *, check: bool = True, chunk_entries: int = CHUNK_ENTRIES
    ) -> Iterator[tuple[int, codec.Entries]]:
        """(first index, entries) for ``[start, stop)`` in bounded chunks, CRC checked.

        ``check=False`` is for filters whose hits are confirmed elsewhere (cancel and
        lookup confirm every candidate against its CRC-checked commit-log record).
        """
        for first in range(start, stop, chunk_entries):
            last = min(stop, first + chunk_entries)
            entries = self.read(first, last)
            bad = codec.bad_rows(entries) if check else NO_ROWS
            if len(bad):
                index = first + int(bad[0])
                seg, off = self.log.locate(index * ENTRY)
                raise IntegrityError(
                    f"{seg.path}: offset {off}: timer-log entry {index} CRC mismatch"
                )
            yield first, entries
        self.log.release_pages()

    def find_ids(self, start: int, hashes: set[int]) -> dict[int, list[IdHit]]:
        """Entries from ``start`` whose id hash is in ``hashes``, by hash, oldest first.

        A binary search per sorted run of the id index (:mod:`id_index`), then the hits'
        entries (not CRC checked: callers confirm each hit on its CRC-checked record).
        """
        found: dict[int, list[IdHit]] = {}
        if not hashes:
            return found
        wanted = np.sort(np.fromiter(hashes, np.uint32, len(hashes)))
        indexes = self.index.find(start, wanted)
        if not len(indexes):
            return found
        entries = self._take(indexes)
        cls = codec.positions_of(entries).tolist()
        for index, h, slot_ms, cl in zip(
            indexes.tolist(), entries["id_hash"].tolist(), entries["slot_ms"].tolist(), cls,
            strict=True,
        ):  # fmt: skip
            found.setdefault(h, []).append(IdHit(index, slot_ms, cl))
        return found

    def scan_ids(self, start: int, hashes: set[int]) -> dict[int, list[IdHit]]:
        """What :meth:`find_ids` finds, by a scan of every entry from ``start`` (the
        reference the index is tested against)."""
        found: dict[int, list[IdHit]] = {}
        wanted = np.fromiter(hashes, np.uint32, len(hashes))
        for first, entries in self.chunks(start, self.end, check=False):
            for row in np.flatnonzero(np.isin(entries["id_hash"], wanted)):
                e = entries[row]
                cl = int(e["cl_word"]) & codec.POS_MASK
                found.setdefault(int(e["id_hash"]), []).append(
                    IdHit(first + int(row), int(e["slot_ms"]), cl)
                )
        return found

    def sync(self) -> None:
        self.log.sync()

    def delete_before(self, index: int) -> int:
        removed = self.log.delete_before(index * ENTRY)
        if removed:
            self.index.delete_before()
        return removed

    def release_pages(self) -> None:
        self.log.release_pages()
        self.index.release_pages()

    def close(self) -> None:
        self.index.close()
        self.log.close()
