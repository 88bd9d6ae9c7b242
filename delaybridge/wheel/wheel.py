"""The time wheel on disk: a fixed array of slots, memory-mapped, updated per batch.

How it works (tick 100 ms, 864,000 slots = a one-day window): a message due at
``t`` sits in the list of slot ``(t // tick_ms) % slots``, and the slot records
``time_ms = t``. Appending a batch links each new timer-log entry to the newest
entry of its slot (its ``prev``) and moves the slot's ``last`` to it -- done for the
whole batch with a few numpy operations, not per message. Reading a tick means
following ``prev`` from ``last``. Because every slot carries its time, slots from
the previous turn are simply overwritten when their number comes round again.

Example: slots=8, tick=1000. A message due at 14,000 goes to slot 6 with
time_ms=14,000. Slot 6 also serves 6,000 and 22,000, but only one of those lies
inside the window [read, read + 8,000) at any moment, which is why the store rolls
later messages instead of putting them here.

Costs: appending n entries is O(n log n) in numpy; finding the next non-empty tick
scans slots in vectorised chunks.

The file is ``64 + 32 * slots`` bytes (27.6 MB by default) but *sparse*: a
:data:`CHUNK` of it (64 KiB: 2,048 slots, 204.8 s of ticks) takes space only once a
slot in it is used, so an empty store's wheel costs one chunk. Slots are read and
written through the map, and a hole of a mapped file must never be touched on a full
disk: a store into it kills the process with SIGBUS instead of raising ENOSPC, and on
tmpfs so does a read (:mod:`delaybridge.file_space`). So the wheel keeps a bitmap of
its *reserved* chunks (allocated with ``posix_fallocate``) and

- reserves the chunks of the slots a batch will use before anything of the batch is
  written (:meth:`plan_link`, :meth:`rebuild_chunk`): a full disk fails the
  reservation with ENOSPC, which the store handles like any failed write;
- never reads a chunk it has not reserved: it holds only empty slots (:meth:`list_of`,
  :meth:`scan` and every pass over the slots skip it).

On open, the chunks the file system reports data in are reserved again (a no-op for
allocated ones; on a file system that cannot report holes, the whole file, as before).
A chunk, once reserved, stays so: a busy wheel grows to its full size over one window.
Why 64 KiB and not a page: a page at a time made the file thousands of extents, one
per reservation, and a recovery's msync of the map 0.4 s slower (measured at 1M
pending); a chunk is 16 times fewer reservations for 60 KiB more in an empty store.

The wheel is an index: everything in it can be rebuilt from the timer log
(:meth:`rebuild_chunk`). Its header's ``stamp`` holds ``timer_end + 1`` after a
clean close and 0 while in use, so recovery knows whether to trust it.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from delaybridge.errors import ConfigError, IntegrityError
from delaybridge.file_space import data_ranges, reserve
from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind
from delaybridge.wheel.slot_codec import CRC, DTYPE, SLOT, SLOT_SIZE

I64 = npt.NDArray[np.int64]
SCAN_CHUNK_SLOTS = 8192
CHUNK = 64 * 1024
"""Bytes of the file reserved at once (a multiple of the page size)."""
assert CHUNK % mmap.PAGESIZE == 0


class SlotList(NamedTuple):
    """The list of one tick: how many entries, and the timer-log indexes at its ends."""

    length: int
    """Entries in the list (the slot's ``count``; 0 when empty)."""
    first: int
    """Index of the oldest entry (-1 when empty)."""
    last: int
    """Index of the newest entry, the head of the ``prev`` chain (-1 when empty)."""


EMPTY_LIST = SlotList(0, -1, -1)


class LinkPlan(NamedTuple):
    """A batch's links, computed but not written (:meth:`TimingWheel.plan_link`)."""

    prev: I64
    """Each entry's predecessor in its slot's list (-1: the first)."""
    slot_idx: I64
    rows: npt.NDArray[np.void]
    """The new contents of the slots at ``slot_idx``."""


class Scan(NamedTuple):
    """The non-empty ticks :meth:`TimingWheel.scan` found, ascending, one row per list."""

    times: I64
    counts: I64
    firsts: I64
    lasts: I64
    scanned_to: int
    """The last tick looked at: the next scan starts one tick after it."""


class TimingWheel:
    """The slot array of one store, backed by ``<directory>/wheel``."""

    def __init__(self, path: Path, tick_ms: int, slots: int) -> None:
        self.path = path
        self.tick_ms = tick_ms
        self.n_slots = slots
        size = HEADER_SIZE + SLOT_SIZE * slots
        self._size = size
        self._reserved = np.zeros(-(-size // CHUNK), dtype=bool)
        """Chunks allocated by :meth:`_reserve` (or found allocated on open)."""
        fresh = not path.exists()
        self.fresh = fresh
        """The file was created by this open (all slots empty)."""
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if fresh:
            header = FileHeader(FileKind.WHEEL, SLOT_SIZE, 0, tick_ms, slots, 0)
            try:
                os.pwrite(self._fd, header.encode(), 0)
                os.ftruncate(self._fd, size)
                self._reserve_chunks(np.zeros(1, dtype=np.int64))  # the header's chunk
            except OSError:
                os.close(self._fd)
                path.unlink()  # a half-made wheel is no wheel: the next open makes it again
                raise
            self.stamp = 0
        else:
            raw = os.pread(self._fd, HEADER_SIZE, 0)
            header = FileHeader.decode(raw, path, FileKind.WHEEL)
            for name, have, want in (
                ("tick_ms", header.tick_ms, tick_ms),
                ("wheel_slots", header.slots, slots),
            ):
                if have != want:
                    os.close(self._fd)
                    raise ConfigError(
                        f"store setting {name}={want} does not match {path} (written with "
                        f"{name}={have}); use the old value or a new data directory"
                    )
            if os.fstat(self._fd).st_size != size:
                os.close(self._fd)
                raise IntegrityError(f"{path}: offset {size}: wheel file has the wrong size")
            self.stamp = header.stamp
            try:
                self._adopt_chunks()
            except OSError:
                os.close(self._fd)
                raise
        self._mm = mmap.mmap(self._fd, size)
        self.slots = np.frombuffer(self._mm, dtype=DTYPE, count=slots, offset=HEADER_SIZE)

    # -- space ------------------------------------------------------------------
    def _adopt_chunks(self) -> None:
        """Reserve again the chunks the file system says hold data: allocated ones cost
        nothing; a file system that cannot report holes reports the whole file, which
        is then allocated whole, as before lazily grown wheels. The header's always."""
        chunks: list[I64] = [np.zeros(1, dtype=np.int64)]
        for start, end in data_ranges(self._fd, 0, self._size):
            chunks.append(np.arange(start // CHUNK, -(-end // CHUNK), dtype=np.int64))
        self._reserve_chunks(np.unique(np.concatenate(chunks)))

    def _reserve(self, slot_idx: I64) -> None:
        """Allocate the chunks of the slots at ``slot_idx`` not allocated yet (OSError,
        ENOSPC on a full disk: nothing of the caller's batch is written then)."""
        chunks = self._chunk_of(slot_idx)
        missing = ~self._reserved[chunks]
        if missing.any():  # rare once the wheel has grown: one vectorised test
            self._reserve_chunks(np.unique(chunks[missing]))

    def _reserve_chunks(self, chunks: I64) -> None:
        """Allocate ``chunks`` (ascending), one call per run of consecutive chunks."""
        if not len(chunks):
            return
        cuts = np.flatnonzero(np.diff(chunks) != 1) + 1
        for run in np.split(chunks, cuts):
            first, last = int(run[0]), int(run[-1])
            start = first * CHUNK
            reserve(self._fd, start, min((last + 1) * CHUNK, self._size) - start)
            self._reserved[first : last + 1] = True

    def _chunk_of(self, slot_idx: I64) -> I64:
        return (HEADER_SIZE + SLOT_SIZE * slot_idx) // CHUNK

    @property
    def reserved_bytes(self) -> int:
        """Bytes of the file allocated by the wheel (its chunks in use, header included)."""
        return min(int(np.count_nonzero(self._reserved)) * CHUNK, self._size)

    # -- state of the file ---------------------------------------------------
    def set_stamp(self, stamp: int) -> None:
        """Write the header's stamp durably (msync the slots first)."""
        self._mm.flush()
        header = FileHeader(FileKind.WHEEL, SLOT_SIZE, 0, self.tick_ms, self.n_slots, stamp)
        os.pwrite(self._fd, header.encode(), 0)
        os.fsync(self._fd)
        self.stamp = stamp

    def bad_slots(self) -> npt.NDArray[np.intp]:
        """Slots in use whose CRC fails (checked in chunks to bound memory)."""
        bad: list[npt.NDArray[np.intp]] = []
        for start, part in self.passes(1 << 16):
            used = np.flatnonzero(part["count"] != 0)
            rows = part[used].view(np.uint8).reshape(-1, SLOT_SIZE)[:, 4:]
            wrong = used[CRC.compute(rows) != part["crc"][used]]
            bad.append(wrong + start)
        return np.concatenate(bad) if bad else np.empty(0, dtype=np.intp)

    def clear(self) -> None:
        """Empty every slot (writing only the slots in use)."""
        for _, part in self.passes():
            used = np.flatnonzero(part["count"] != 0)
            if len(used):
                part["count"][used] = 0

    def passes(self, step: int = 1 << 18) -> Iterator[tuple[int, npt.NDArray[np.void]]]:
        """The slots in reserved chunks, in pieces of at most ``step`` slots: (index of
        the first slot, the slots). Chunks never reserved hold only empty slots and are
        not touched (a hole must not be read through the map: the module docstring).
        Each piece's pages leave the RSS once the caller is done with it: a pass over
        every slot (recovery, the live-start recount) must not leave the file resident
        (slots in use fault back in when next used)."""
        chunks = np.flatnonzero(self._reserved)
        for run in np.split(chunks, np.flatnonzero(np.diff(chunks) != 1) + 1):
            if not len(run):
                continue
            lo = self._first_slot(int(run[0]))
            hi = min(self._first_slot(int(run[-1]) + 1), self.n_slots)
            for start in range(lo, hi, step):
                stop = min(start + step, hi)
                yield start, self.slots[start:stop]
                page = mmap.PAGESIZE
                first = (HEADER_SIZE + SLOT_SIZE * start) // page * page
                end = HEADER_SIZE + SLOT_SIZE * stop
                self._mm.madvise(mmap.MADV_DONTNEED, first, end - first)

    @staticmethod
    def _first_slot(chunk: int) -> int:
        """The first slot in ``chunk`` (slots never straddle chunks: 64 and 64 KiB are
        both multiples of 32)."""
        return max(0, (chunk * CHUNK - HEADER_SIZE) // SLOT_SIZE)

    # -- lists ----------------------------------------------------------------
    def index(self, time_ms: I64) -> I64:
        return (time_ms // self.tick_ms) % self.n_slots

    def list_of(self, time_ms: int) -> SlotList:
        """The list of the tick at ``time_ms``; :data:`EMPTY_LIST` if it has none."""
        offset = HEADER_SIZE + SLOT_SIZE * ((time_ms // self.tick_ms) % self.n_slots)
        if not self._reserved[offset // CHUNK]:
            return EMPTY_LIST  # a chunk never used holds only empty slots
        _, count, slot_ms, first, last = SLOT.unpack_from(self._mm, offset)
        if count == 0 or slot_ms != time_ms:
            return EMPTY_LIST
        return SlotList(count, first, last)

    def link(self, time_ms: I64, indexes: I64) -> I64:
        """:meth:`plan_link`, then :meth:`apply_link`; returns the entries' prevs."""
        plan = self.plan_link(time_ms, indexes)
        self.apply_link(plan)
        return plan.prev

    def plan_link(self, time_ms: I64, indexes: I64) -> LinkPlan:
        """How to add entries (timer-log ``indexes``, ascending) to their ticks, changing
        nothing yet (the store applies it once the entries are on disk).

        Within the batch, an entry's prev is the batch's previous entry of the same
        tick; the first of each tick links to the slot's current ``last`` (or -1 when
        the slot is empty or stale). The chunks of the slots it will write are reserved
        first: OSError (ENOSPC, a full disk) before anything of the batch is written."""
        order = np.argsort(time_ms, kind="stable")
        t_sorted = time_ms[order]
        k_sorted = indexes[order]
        starts = np.empty(len(order), dtype=bool)
        starts[:1] = True
        np.not_equal(t_sorted[1:], t_sorted[:-1], out=starts[1:])
        prev_sorted = np.empty(len(order), dtype=np.int64)
        prev_sorted[1:] = k_sorted[:-1]
        group_t = t_sorted[starts]
        slot_idx = self.index(group_t)
        self._reserve(slot_idx)
        cur = self.slots[slot_idx]
        live = (cur["count"] != 0) & (cur["time_ms"] == group_t)
        prev_sorted[starts] = np.where(live, cur["last"], -1)
        prev = np.empty(len(order), dtype=np.int64)
        prev[order] = prev_sorted
        group_start = np.flatnonzero(starts)
        group_end = np.append(group_start[1:], len(order)) - 1
        new = np.empty(len(slot_idx), dtype=DTYPE)
        new["time_ms"] = group_t
        new["first"] = np.where(live, cur["first"], k_sorted[group_start])
        new["last"] = k_sorted[group_end]
        new["count"] = np.where(live, cur["count"], 0) + (group_end - group_start + 1)
        new["crc"] = CRC.compute(new.view(np.uint8).reshape(-1, SLOT_SIZE)[:, 4:])
        return LinkPlan(prev, slot_idx, new)

    def apply_link(self, plan: LinkPlan) -> None:
        """Write the slots of a :meth:`plan_link` (into reserved chunks: cannot fail)."""
        self.slots[plan.slot_idx] = plan.rows

    def rebuild_chunk(self, time_ms: I64, indexes: I64) -> None:
        """Re-add entries found in the timer log (ascending indexes) without linking.

        Recovery calls this for millions of entries, so it avoids sorting: per slot,
        ``bincount`` gives the count and fancy assignment (the last write of a
        repeated index wins) the newest entry; the oldest comes from the reversed
        arrays. Live entries of one slot all share one tick (the window invariant).
        Slot CRCs are left to :meth:`seal_rebuild`, once, at the end. The chunks of the
        slots it writes are reserved first (OSError on a full disk: nothing written).
        """
        if len(time_ms) == 0:
            return
        slot_idx = self.index(time_ms)
        counts = np.bincount(slot_idx, minlength=self.n_slots)
        touched = np.flatnonzero(counts)
        self._reserve(touched)
        last = np.empty(self.n_slots, dtype=np.int64)
        last[slot_idx] = indexes
        first = np.empty(self.n_slots, dtype=np.int64)
        first[slot_idx[::-1]] = indexes[::-1]
        tick = np.empty(self.n_slots, dtype=np.int64)
        tick[slot_idx] = time_ms
        cur = self.slots[touched]
        live = (cur["count"] != 0) & (cur["time_ms"] == tick[touched])
        new = np.empty(len(touched), dtype=DTYPE)
        new["crc"] = 0
        new["time_ms"] = tick[touched]
        new["first"] = np.where(live, cur["first"], first[touched])
        new["last"] = last[touched]
        new["count"] = np.where(live, cur["count"], 0) + counts[touched]
        self.slots[touched] = new

    def seal_rebuild(self) -> None:
        """Compute the CRC of every slot in use (after the last :meth:`rebuild_chunk`)."""
        for _, part in self.passes():
            used = np.flatnonzero(part["count"] != 0)
            if len(used):
                rows = part[used].view(np.uint8).reshape(-1, SLOT_SIZE)[:, 4:]
                part["crc"][used] = CRC.compute(rows)

    # -- scanning ------------------------------------------------------------
    def scan(self, from_ms: int, to_ms: int, limit: int = SCAN_CHUNK_SLOTS) -> Scan:
        """Non-empty ticks in [from_ms, to_ms], looking at no more than ``limit`` slots."""
        n_ticks = max(0, min((to_ms - from_ms) // self.tick_ms + 1, limit, self.n_slots))
        times = from_ms + self.tick_ms * np.arange(n_ticks, dtype=np.int64)
        idx = self.index(times)
        on = self._reserved[self._chunk_of(idx)]
        if not on.all():  # slots in chunks never used are empty; their holes stay unread
            times, idx = times[on], idx[on]
        part = self.slots[idx]
        hit = (part["count"] != 0) & (part["time_ms"] == times)
        found = part[hit]
        return Scan(
            times[hit],
            found["count"].astype(np.int64),
            found["first"],
            found["last"],
            from_ms + (n_ticks - 1) * self.tick_ms,
        )

    def live_count(self, after_ms: int) -> int:
        """Entries in the lists of ticks after ``after_ms`` (recovery checks the sum)."""
        total = 0
        for _, part in self.passes():
            used = (part["count"] != 0) & (part["time_ms"] > after_ms)
            total += int(part["count"][used].sum())
        return total

    def live_summary(self, from_ms: int) -> tuple[int | None, int | None]:
        """(earliest tick >= from_ms in use, smallest ``first`` among them)."""
        earliest: int | None = None
        min_first: int | None = None
        for _, part in self.passes():
            used = (part["count"] != 0) & (part["time_ms"] >= from_ms)
            if not used.any():
                continue
            t = int(part["time_ms"][used].min())
            f = int(part["first"][used].min())
            earliest = t if earliest is None else min(earliest, t)
            min_first = f if min_first is None else min(min_first, f)
        return earliest, min_first

    def close(self) -> None:
        del self.slots
        self._mm.close()
        os.close(self._fd)
