"""The timer log: fixed-size entries, appended per batch, read by index or in chunks.

Entry formats are in :mod:`timer_entry` (the 20-byte compact entry, written from version
2 on, and the 32-byte wide entry of version 1, read only and the in-memory form every
reader gets). Files are a :class:`SegmentedLog` whose positions are ``index * 32``
whatever a segment stores (:mod:`timer_segments` decodes per segment); :mod:`id_index`
finds entries by id hash (sorted runs in ``.tidx`` files beside the segments). Not
thread-safe: the store's owner thread calls it.
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
from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind
from delaybridge.timerlog import timer_entry
from delaybridge.timerlog import timer_segments as tseg
from delaybridge.timerlog.id_index import IdIndex
from delaybridge.timerlog.segments import SegmentedLog

ENTRY = tseg.UNIT
I64 = npt.NDArray[np.int64]
CHUNK_ENTRIES = 1 << 18  # 8 MiB per vectorised pass


class IdHit(NamedTuple):
    """A live entry whose id hash matched (confirm it on its commit-log record)."""

    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose
    slot_ms: int
    cl_pos: int


class TimerLog:
    """Segmented timer log in ``<store>/timerlog/``."""

    def __init__(
        self,
        directory: Path,
        entries_per_segment: int,
        run_entries: int = 1 << 16,
        tick_ms: int = 100,
    ) -> None:
        self.log = SegmentedLog(
            directory,
            FileKind.TIMER_LOG,
            "tlog",
            timer_entry.COMPACT_SIZE,
            entries_per_segment * ENTRY,
            unit=ENTRY,
            entry_sizes=tseg.ENTRY_SIZES,
        )
        self.tick_ms = tick_ms
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

    def append(self, entries: timer_entry.Entries) -> int:
        """Write a batch of wide entries (``crc`` not used) with one syscall, as
        version-2 entries; returns the first one's index. A batch whose ticks or
        commit-log positions its segment's bases cannot hold starts a new segment."""
        size = len(entries) * ENTRY
        slot, cl = entries["slot_ms"], timer_entry.positions_of(entries)
        tail = self.log.tail
        new: FileHeader | None = None
        bases = tseg.bases_of(tail) if tail is not None else None
        if bases is None or self.log.must_seal(size) or not timer_entry.fits(slot, cl, bases):
            bases = timer_entry.bases_for(slot, cl, self.tick_ms)
            if not timer_entry.fits(slot, cl, bases):
                raise timer_entry.EntryOverflow(
                    f"{self.log.directory}: a batch of {len(entries)} entries spans more "
                    f"ticks than a segment holds (2^30 of {self.tick_ms} ms)"
                )
            new = tseg.header(bases)
        raw = timer_entry.encode(
            entries["id_hash"],
            entries["prev"],
            slot,
            cl,
            timer_entry.kinds_of(entries),
            self.end,
            bases,
        )
        return self.log.append(raw.tobytes(), size, new) // ENTRY

    def entry(self, index: int) -> timer_entry.TimerEntry:
        """One entry, CRC checked."""
        seg, offset = self.log.locate(index * ENTRY)
        return tseg.decode_one(seg, offset, index)

    def chase(self, last: int, count: int) -> tuple[array[int], array[int], array[int]]:
        """A slot's list, oldest first: (indexes, commit-log positions, entry types).

        The list is threaded backwards (each entry knows its predecessor), so it is
        collected whole before it can be read in arrival order: 17 bytes per entry in
        compact arrays, never the messages themselves. Every entry's CRC is checked.
        """
        idx: array[int] = array("q")
        cls: array[int] = array("q")
        kinds: array[int] = array("b")
        add_idx = idx.append
        add_cl = cls.append
        add_kind = kinds.append
        segs = self.log.segments
        bases = [s.base for s in segs]
        lo = hi = 0
        mm: mmap.mmap | None = None
        path = self.log.directory
        crc32 = zlib.crc32
        mask, shift = timer_entry.POS_MASK, timer_entry.TYPE_SHIFT
        v1 = timer_entry.WIDE.unpack_from
        v2 = timer_entry.COMPACT.unpack_from
        v2_shift = timer_entry.COMPACT_TYPE_SHIFT
        size = ENTRY
        cl_base = 0
        wide = True
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
                size = segs[seg_i].entry_size
                got = tseg.bases_of(segs[seg_i])
                wide = got is None
                cl_base = 0 if got is None else got.cl_base
            off = HEADER_SIZE + (pos - lo) // ENTRY * size
            if wide:
                crc, _, prev, _, word = v1(mm, off)
                kind, cl = word >> shift, word & mask
            else:
                crc, _, back, word, cl = v2(mm, off)
                kind, cl, prev = word >> v2_shift, cl + cl_base, index - back if back else -1
            if crc32(mm[off + 4 : off + size]) != crc:
                raise IntegrityError(f"{path}: offset {off}: timer-log entry {index} CRC mismatch")
            add_idx(index)
            add_cl(cl)
            add_kind(kind)
            index = prev
        idx.reverse()
        cls.reverse()
        kinds.reverse()
        return idx, cls, kinds

    def read(self, start: int, stop: int, check: bool = False) -> timer_entry.Entries:
        """Entries ``[start, stop)`` as a wide structured array (a copy, may span
        segments); ``check``: IntegrityError naming the first entry failing its CRC."""
        parts = []
        pos, end = start * ENTRY, stop * ENTRY
        while pos < end:
            seg, off = self.log.locate(pos)
            seg_i = self.log.segments.index(seg)
            take = min(end, self.log.segment_end(seg_i)) - pos
            raw = tseg.view(seg, off, take // ENTRY)
            bad = tseg.bad_rows(seg, raw) if check else None
            parts.append(tseg.decode(seg, raw, pos // ENTRY))
            del raw  # no view of the map may outlive this (an exception's frame would)
            if bad is not None and len(bad):
                self._raise(seg, pos // ENTRY + int(bad[0]))
            pos += take
        if not parts:
            return np.empty(0, dtype=timer_entry.DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _raise(self, seg: tseg.Segment, index: int) -> None:
        _, off = self.log.locate(index * ENTRY)
        raise IntegrityError(f"{seg.path}: offset {off}: timer-log entry {index} CRC mismatch")

    def gather(self, indexes: I64) -> timer_entry.Entries:
        """Entries at arbitrary ``indexes`` (vectorised per segment), CRC checked."""
        return self._take(indexes, check=True)

    def _take(self, indexes: I64, check: bool = False) -> timer_entry.Entries:
        """Entries at ``indexes``, CRC checked if ``check``."""
        bases = np.asarray(self.log._bases, dtype=np.int64) // ENTRY
        seg_of = np.searchsorted(bases, indexes, side="right") - 1
        if len(indexes) and (int(indexes.min()) < self.start or int(indexes.max()) >= self.end):
            bad = indexes[(indexes < self.start) | (indexes >= self.end)][0]
            raise IntegrityError(
                f"{self.log.directory}: a slot list points to entry {bad}, "
                f"outside the log [{self.start}, {self.end})"
            )
        out = np.empty(len(indexes), dtype=timer_entry.DTYPE)
        for s in np.unique(seg_of):
            seg = self.log.segments[int(s)]
            rows = seg_of == s
            at = indexes[rows]
            raw = tseg.take(seg, at - bases[s])
            bad = tseg.bad_rows(seg, raw) if check else None
            if bad is not None and len(bad):
                self._raise(seg, int(at[bad[0]]))
            out[rows] = tseg.decode(seg, raw, at)
        return out

    def chunks(
        self, start: int, stop: int, *, check: bool = True, chunk_entries: int = CHUNK_ENTRIES
    ) -> Iterator[tuple[int, timer_entry.Entries]]:
        """(first index, entries) for ``[start, stop)`` in bounded chunks, CRC checked.

        ``check=False`` is for filters whose hits are confirmed elsewhere (cancel and
        lookup confirm every candidate against its CRC-checked commit-log record).
        """
        for first in range(start, stop, chunk_entries):
            yield first, self.read(first, min(stop, first + chunk_entries), check)
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
        cls = timer_entry.positions_of(entries).tolist()
        for index, h, slot_ms, cl in zip(
            indexes.tolist(),
            entries["id_hash"].tolist(),
            entries["slot_ms"].tolist(),
            cls,
            strict=True,
        ):
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
                cl = int(e["cl_word"]) & timer_entry.POS_MASK
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

    def punch_before(self, index: int) -> int:
        """Punch the dead prefix of the first segment, up to the id-index run holding
        entry ``index`` (a run is read whole: its entries before ``index`` stay); returns
        the bytes given back. The id index's own files are not punched: a run's slot is
        6 bytes an entry, and goes with its segment."""
        return self.log.punch_before(self.index.run_start(index) * ENTRY)

    def release_pages(self) -> None:
        self.log.release_pages()
        self.index.release_pages()

    def close(self) -> None:
        self.index.close()
        self.log.close()
