"""Giving back the disk space of finished messages, once a checkpoint no longer needs it.

A message is *finished* when the delivery cursor has passed it: delivered and marked
so, cancelled and skipped, or rolled forward (its copy is later in the log). Its bytes
are dead once a checkpoint that says so is on disk, since recovery never reads behind
the checkpoint's cursor; the flush calls :meth:`Reclaimer.reclaim` right after writing
that checkpoint (:mod:`durability`, step 6). Three ways, cheapest first:

1. **Whole segments** wholly before ``live_start`` (the oldest timer-log entry a tick
   at or after the cursor still needs) are deleted, and the commit-log segments wholly
   before that entry's record.
2. **The dead prefix of the first remaining segment** of each log -- the active
   segment too, which is what lets a store whose first 64 MiB segment has not filled
   give anything back -- is punched out (:meth:`SegmentedLog.punch_before`): up to the
   record of ``live_start`` in the commit log, up to the start of the id-index run
   holding ``live_start`` in the timer log (the index reads whole runs).
3. **Records finished out of arrival order** after ``live_start`` (a message due
   sooner than older ones): the blocks inside each such record are punched, all but
   the block holding its first :data:`HEAD_BYTES` (its length, CRC, type and fixed
   fields stay readable: recovery's last-record check and a rescue read them; the rest
   reads as zeros). A record smaller than two blocks holds no such block and gives
   nothing back this way. The pass reads the live timer entries (vectorised, ~60 ms
   per million) and makes one system call per record it frees, so it runs only while
   the live range holds at most :data:`RECORD_PASS_MAX_ENTRIES`; a bigger store gives
   space back by its prefix only.

Ways 1 and 2 run at every flush that recounted ``live_start`` (every
``LIVE_RECOMPUTE_MS``, 30 s, or at every flush that finds the cursor moved while the
owner says space is short: :attr:`TimerStore.space_short`); way 3 with the 30 s recount,
and at most every :data:`RECORD_PASS_SHORT_MS` while space is short. Nothing that is
not finished is ever touched: every range is computed from the checkpoint's own
``live_start`` and cursor.

On a file system that cannot punch holes (``SegmentedLog.holes`` False) only deletion
is left: then a store whose every message is finished deletes its active commit-log
segment (:meth:`SegmentedLog.delete_all_before`; the next append starts a new one) and
seals its active timer-log segment (deleted once the next one starts).

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import logging

import numpy as np

from delaybridge.errors import IntegrityError
from delaybridge.fileformat import HEADER_SIZE
from delaybridge.timerlog import timer_entry
from delaybridge.timerlog.commit_log import CommitLog
from delaybridge.timerlog.timer_log import TimerLog

HEAD_BYTES = 64
"""What a punched record keeps readable from its start: the length and CRC prefix, the
type and every fixed field of both layouts (52 bytes for the widest)."""
RECORD_PASS_MAX_ENTRIES = 1 << 20
"""Way 3 runs while the live range holds at most this many timer entries (~60 ms)."""
RECORD_PASS_SHORT_MS = 1_000
"""While space is short, way 3 runs at most this often (the flush runs every 200 ms)."""
log = logging.getLogger(__name__)


class Reclaimer:
    """Gives back the space of one store's finished messages (the module's three ways)."""

    def __init__(self, commit_log: CommitLog, timer: TimerLog) -> None:
        self.commit_log = commit_log
        self.timer = timer
        self._records_through_ms: int | None = None
        """Records of ticks before this were punched by an earlier pass (None: none)."""

    def reclaim(self, live_start: int, done_tick_ms: int, records: bool) -> int:
        """Give back what lies before ``live_start`` and, with ``records``, the finished
        records after it (ticks before ``done_tick_ms``). Returns the bytes punched
        (whole segments deleted come on top). Both values are the checkpoint's."""
        clog, tlog = self.commit_log.log, self.timer.log
        cl_start = self._record_of(live_start)
        if self.timer.delete_before(live_start) + self.commit_log.delete_before(cl_start):
            self.timer.sync()
            self.commit_log.sync()
        freed = self.timer.punch_before(live_start) + self.commit_log.punch_before(cl_start)
        if records and done_tick_ms != self._records_through_ms:
            freed += self._punch_finished(live_start, done_tick_ms)
        if clog.holes is False and live_start >= self.timer.end:
            if clog.delete_all_before(self.commit_log.end):  # nothing live: roll it
                clog.sync()
            tlog.seal()
        return freed

    def _record_of(self, index: int) -> int:
        """Commit-log position of entry ``index``'s record (the log's end past the last)."""
        if index < self.timer.end:
            return self.timer.entry(index).cl_pos
        return self.commit_log.end

    def _punch_finished(self, live_start: int, done_tick_ms: int) -> int:
        """Way 3 of the module docstring: the inside of every record of a tick before
        ``done_tick_ms`` (and not punched by an earlier pass) from ``live_start`` on."""
        clog = self.commit_log.log
        live = self.timer.end - live_start
        unit = clog.block()
        if clog.holes is False or not live or live > RECORD_PASS_MAX_ENTRIES:
            return 0
        since = self._records_through_ms
        freed = 0
        try:
            for first, entries in self.timer.chunks(live_start, self.timer.end):
                after = first + len(entries)
                ends = np.empty(len(entries), dtype=np.int64)
                starts = timer_entry.positions_of(entries).astype(np.int64)
                ends[:-1] = starts[1:]
                ends[-1] = self._record_of(after)
                slot = entries["slot_ms"]
                finished = slot < done_tick_ms
                if since is not None:
                    finished &= slot >= since
                got, whole = self._punch_records(starts[finished], ends[finished], unit)
                freed += got
                if not whole:
                    return freed  # no room to punch, or no holes: the next pass tries again
        except IntegrityError as exc:  # a damaged entry: its neighbours stay as they are
            log.warning("%s: finished records not given back: %s", clog.directory, exc)
            return freed
        self._records_through_ms = done_tick_ms
        return freed

    def _punch_records(self, starts: np.ndarray, ends: np.ndarray, unit: int) -> tuple[int, bool]:
        """Punch the inside of the records ``[starts, ends)`` (log positions), keeping the
        block of each one's head; (bytes given back, whether every one was punched)."""
        clog = self.commit_log.log
        bases = np.asarray([s.base for s in clog.segments], dtype=np.int64)
        seg_of = np.searchsorted(bases, starts, side="right") - 1
        base = bases[seg_of]
        lo = (starts - base + HEADER_SIZE + HEAD_BYTES - 1) // unit * unit + unit
        hi = (ends - base + HEADER_SIZE) // unit * unit
        wide = np.flatnonzero(hi > lo)
        freed = 0
        for j in wide.tolist():
            seg = clog.segments[int(seg_of[j])]
            start, stop = int(lo[j]), int(hi[j])
            if not clog.punch(seg, start, stop):
                return freed, False
            freed += stop - start
        return freed, True
