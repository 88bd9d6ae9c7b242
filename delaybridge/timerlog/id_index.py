"""The id index of a timer log: which entries carry an id hash, without a scan.

The timer log is append-only, so its entries are cut into *runs* of ``run_entries``
(aligned to each segment's first entry; a segment's last run may be shorter, a run
never spans two segments). A run that is whole -- the log's end passed it, or its
segment is sealed -- is *sealed*: its ``(id_hash, row)`` pairs, sorted by hash, go
once into the segment's index file (:mod:`id_index_file`) and are read through the
map from then on. The one run still filling (the *open* run, at the log's end) is kept
sorted in memory, merged with the entries appended since the last look (a sort of
the new entries and one ``np.insert``), and its arrays become the slot when it seals.

A query (:meth:`IdIndex.find`) is one pair of ``np.searchsorted`` per sealed run at or
after its start plus one on the open run: O(runs x log run_entries) for any batch of
hashes, about 15 us per run, never a pass over the entries. Hits are rows; the caller
reads their entries.

Trust: index files are never fsynced and never believed. On open, every sealed run the
store may still query (from ``live_start``) is *verified* against the timer log before
use -- hashes ascending, rows a permutation of the run, and each row's entry carries
the hash its slot says -- and rebuilt (a stable argsort of the run's ``id_hash``
column) when it fails or is missing. So a torn, zeroed, deleted or stale index (a run
written before a crash from entries the checkpoint never covered) costs a rebuild,
never a missed cancel. Files of segments that no longer exist are deleted on open.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import bisect
import logging

import numpy as np
import numpy.typing as npt

from delaybridge.durable import allocated_bytes
from delaybridge.timerlog import timer_entry
from delaybridge.timerlog.id_index_file import U16, U32, IndexFile
from delaybridge.timerlog.segments import Segment, SegmentedLog

ENTRY = timer_entry.WIDE_SIZE
I64 = npt.NDArray[np.int64]
SUFFIX = "tidx"
log = logging.getLogger(__name__)


class IdIndex:
    """Sorted runs of one timer log's id hashes, in ``.tidx`` files beside its segments."""

    def __init__(self, log: SegmentedLog, run_entries: int) -> None:
        self.log = log
        self.run_entries = run_entries
        self.files: dict[int, IndexFile] = {}
        """Segment base (byte position, its name) -> its index file, from its first seal."""
        self.sealed: dict[int, tuple[int, int]] = {}
        """First entry of each usable sealed run -> (segment's first entry, entry count)."""
        self.held: dict[int, tuple[U32, U16]] = {}
        """Sealed runs whose slot could not be written (a full disk): kept in memory
        and written again at each :meth:`catch_up` until it works."""
        self._firsts: list[int] = []  # sorted keys of ``sealed``
        self.floor: int | None = None
        """Runs from here on are all usable (None: not loaded yet)."""
        self.frontier = 0
        """First entry of the open run: every whole run before it (from ``floor``) is sealed."""
        self._open_hashes: U32 = np.empty(0, np.uint32)
        self._open_rows: npt.NDArray[np.uint32] = np.empty(0, np.uint32)
        self._open_first = self._open_end = 0  # the arrays sort [_open_first, _open_end)
        self.rebuilt = 0
        """Sealed runs rebuilt on load because their slot was missing or failed checks."""

    # -- files -------------------------------------------------------------------
    def open(self) -> None:
        """Adopt the index files of the log's segments (after the log is opened); delete
        the others and those that do not fit (their runs are rebuilt on load)."""
        segments = {s.base: s for s in self.log.segments}
        for path in sorted(self.log.directory.glob(f"*.{SUFFIX}")):
            if not path.stem.isdigit():
                continue  # not a name this index writes: left alone
            base = int(path.stem)
            seg = segments.get(base)
            f = (
                None
                if seg is None
                else IndexFile.adopt(path, base, self.run_entries, self._slots(seg))
            )
            if f is None:
                path.unlink()
            else:
                self.files[base] = f

    def _slots(self, seg: Segment) -> int:
        return -(-(seg.capacity // ENTRY) // self.run_entries)

    def _file(self, seg: Segment) -> IndexFile:
        base = seg.base
        f = self.files.get(base)
        if f is None:
            path = self.log.directory / f"{base:020d}.{SUFFIX}"
            f = self.files[base] = IndexFile.create(path, base, self.run_entries, self._slots(seg))
        return f

    # -- runs --------------------------------------------------------------------
    def _segment_of(self, index: int) -> int:
        return bisect.bisect_right(self.log._bases, index * ENTRY) - 1

    def run_start(self, index: int) -> int:
        """First entry of the run holding ``index``: the index reads whole runs, so the
        timer log keeps every entry from there on (:meth:`TimerLog.punch_before`)."""
        return self._run_first(index)

    def _run_first(self, index: int) -> int:
        """First entry of the run holding ``index`` (``index`` itself past the segments)."""
        i = self._segment_of(index)
        if i < 0:
            return index
        seg = self.log.segments[i]
        base = seg.base // ENTRY
        if index >= base + seg.capacity // ENTRY:
            return index
        return base + (index - base) // self.run_entries * self.run_entries

    def _whole(self, first: int) -> tuple[Segment, int] | None:
        """(segment, entry count) of the run starting at ``first`` if it is whole."""
        i = self._segment_of(first)
        if i < 0:
            return None
        seg = self.log.segments[i]
        base = seg.base // ENTRY
        end = min(first + self.run_entries, base + seg.capacity // ENTRY)
        if i + 1 < len(self.log.segments):  # sealed: its data ends where the next begins
            end = min(end, self.log.segment_end(i) // ENTRY)
        elif end > self.log.end // ENTRY:
            return None
        return (seg, end - first) if end > first else None

    def _column(self, seg: Segment, first: int, count: int) -> U32:
        """The ``id_hash`` of entries ``first``.. (a contiguous copy)."""
        off = seg.offset(first * ENTRY)  # id_hash is the second u32 of both entry formats
        dtype = np.dtype(
            {"names": ["id_hash"], "formats": ["<u4"], "offsets": [4], "itemsize": seg.entry_size}
        )
        return np.ascontiguousarray(np.frombuffer(seg.map(), dtype, count, off)["id_hash"])

    def _add(self, first: int, base: int, count: int) -> None:
        if first not in self.sealed:
            bisect.insort(self._firsts, first)
        self.sealed[first] = (base, count)

    def _seal(self, first: int, seg: Segment, count: int) -> None:
        """Sort a whole run into its slot (from the open run's arrays when they hold it)."""
        if first == self._open_first and self._open_end > first:
            self._extend_open(first + count)
            hashes, rows = self._open_hashes, self._open_rows.astype(np.uint16)
        else:
            col = self._column(seg, first, count)
            order = np.argsort(col, kind="stable")
            hashes, rows = col[order], order.astype(np.uint16)
        self._add(first, seg.base // ENTRY, count)
        self.held[first] = (hashes, rows)
        self._write_held()

    def _write_held(self) -> None:
        """Write held runs to their slots; a failure (OSError: a full disk) keeps them
        held -- an index write never fails a cancel, an append or a flush."""
        for first, (hashes, rows) in list(self.held.items()):
            i = self._segment_of(first)
            seg = self.log.segments[i]
            base = seg.base // ENTRY
            try:
                self._file(seg).write((first - base) // self.run_entries, first, hashes, rows)
            except OSError as exc:
                log.warning(
                    "%s: id index run at entry %d kept in memory: %s",
                    self.log.directory,
                    first,
                    exc,
                )
                return
            del self.held[first]

    def _adopt(self, first: int, seg: Segment, count: int) -> None:
        """Use a run's slot if it sorts exactly the run's entries; else rebuild it."""
        base = seg.base // ENTRY
        f = self.files.get(seg.base)
        got = f.claimed((first - base) // self.run_entries, first, count) if f else None
        if got is not None and _sorts(got, self._column(seg, first, count)):
            self._add(first, base, count)
            return
        self.rebuilt += 1
        self._seal(first, seg, count)

    def load(self, start: int) -> None:
        """Make every whole run from ``start`` usable (verified or rebuilt), then sort the
        open run; called once on open with ``live_start``, and again if asked for less."""
        first = self._run_first(max(start, self.log.start // ENTRY))
        stop = self.frontier if self.floor is not None else None
        while stop is None or first < stop:
            whole = self._whole(first)
            if whole is None:
                break
            if first not in self.sealed:
                self._adopt(first, *whole)
            first += whole[1]
        if self.floor is None:
            self.frontier = first
        self.floor = self._run_first(max(start, self.log.start // ENTRY))
        self.catch_up()
        self.release_pages()

    def catch_up(self) -> None:
        """Seal the runs the log's end has passed and sort the open run's new entries."""
        if self.floor is None:
            return
        if self.held:
            self._write_held()
        while (whole := self._whole(self.frontier)) is not None:
            seg, count = whole
            self._seal(self.frontier, seg, count)
            self.frontier += count
        if self._open_first != self.frontier:  # the arrays hold a run sealed since
            self._open_hashes = np.empty(0, np.uint32)
            self._open_rows = np.empty(0, np.uint32)
            self._open_first = self._open_end = self.frontier
        self._extend_open(self.log.end // ENTRY)

    def _extend_open(self, end: int) -> None:
        """Merge entries [_open_end, end) into the open run's sorted arrays."""
        if end <= self._open_end:
            return
        seg = self.log.segments[self._segment_of(self._open_end)]
        col = self._column(seg, self._open_end, end - self._open_end)
        order = np.argsort(col, kind="stable")
        at = np.searchsorted(self._open_hashes, col[order], side="right")
        rows = (order + (self._open_end - self._open_first)).astype(np.uint32)
        self._open_hashes = np.insert(self._open_hashes, at, col[order])
        self._open_rows = np.insert(self._open_rows, at, rows)
        self._open_end = end

    # -- queries -----------------------------------------------------------------
    def find(self, start: int, wanted: U32) -> I64:
        """Indexes of entries from ``start`` to the log's end whose id hash is in
        ``wanted`` (sorted, unique), ascending."""
        if self.floor is None or start < self.floor:
            self.load(start)
        self.catch_up()
        parts: list[I64] = []
        k = max(0, bisect.bisect_right(self._firsts, start) - 1)
        for first in self._firsts[k:]:
            base, count = self.sealed[first]
            slot = (first - base) // self.run_entries
            held = self.held.get(first)
            hashes, rows = held or self.files[base * ENTRY].run(slot, count)
            parts.append(_search(hashes, rows, wanted) + first)
        parts.append(_search(self._open_hashes, self._open_rows, wanted) + self.frontier)
        found = np.sort(np.concatenate(parts))
        return found[found >= start]

    # -- deletion and pages --------------------------------------------------------
    def delete_before(self) -> None:
        """Forget runs and delete files of segments the log no longer has."""
        bases = {s.base for s in self.log.segments}
        for base in [b for b in self.files if b not in bases]:
            f = self.files.pop(base)
            f.close()
            f.path.unlink()
        start = self.log.start // ENTRY
        while self._firsts and self._firsts[0] < start:
            first = self._firsts.pop(0)
            del self.sealed[first]
            self.held.pop(first, None)
        if self.floor is not None:
            self.floor = max(self.floor, start)

    def bytes_on_disk(self) -> int:
        return sum(allocated_bytes(f.path) for f in self.files.values())

    def release_pages(self) -> None:
        for f in self.files.values():
            f.release_pages()

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files.clear()
        self.sealed.clear()
        self._firsts.clear()


def _search(hashes: U32, rows: npt.NDArray[np.unsignedinteger], wanted: U32) -> I64:
    """Rows (as int64) whose hash is in ``wanted``, from a run sorted by hash."""
    lo = np.searchsorted(hashes, wanted, side="left")
    n = np.searchsorted(hashes, wanted, side="right") - lo
    total = int(n.sum())
    if not total:
        return np.empty(0, np.int64)
    keep = n > 0
    lo, n = lo[keep], n[keep]
    at = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(total)
    return rows[at].astype(np.int64)


def _sorts(run: tuple[U32, U16], column: U32) -> bool:
    """Does ``run`` sort exactly ``column``: hashes ascending, rows a permutation of the
    column's rows, each row's hash the one beside it?"""
    hashes, rows = run
    n = len(column)
    if len(hashes) != n or (n and int(rows.max()) >= n):
        return False
    return not n or (
        bool(np.all(hashes[1:] >= hashes[:-1]))
        and bool(np.all(column[rows] == hashes))
        and bool(np.all(np.bincount(rows, minlength=n) == 1))
    )
