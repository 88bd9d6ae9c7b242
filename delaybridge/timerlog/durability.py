"""The flush protocol of a store: what makes everything before it durable, in order.

:meth:`Flusher.flush` follows these steps (the store expires waiting cancels first):

1. fsync the commit log, the timer log and the cancel log (its pending writes first),
   then bring the id index up to the timer log's end (sort whole runs into their
   slots; never fsynced: recovery verifies it, see :mod:`id_index`);
2. forget applied cancels of ticks the delivery cursor has passed;
3. every ``LIVE_RECOMPUTE_MS`` (or when asked, or when the cursor moved while space is
   short: :attr:`Flusher.space_short`), recompute ``live_start``: the oldest timer-log
   entry a tick at or after the cursor's still needs (a pass over every slot in use,
   whose pages leave the process's RSS chunk by chunk: ``TimingWheel``);
4. replace the checkpoint (temp, fsync, rename, fsync dir) -- unless it would say what
   the last one says, or only that time passed (the delivery cursor moved over empty
   ticks, the owner's changelog mark over its progress records) and the last was
   written less than ``IDLE_CHECKPOINT_MS`` ago: an idle store writes nothing, which
   also spares a full disk a write it cannot make -- then drop a compacted cancel log's
   previous generation;
5. let mapped log pages read since the last flush leave the process's RSS;
6. give back the space of finished messages (only now: a checkpoint that no longer
   needs them is on disk): segments wholly before ``live_start`` deleted, the dead
   prefix of the first remaining ones punched, and -- with the 30 s recount, or every
   second while space is short -- the inside of large records finished out of
   arrival order (:mod:`reclaim`);
7. compact the cancel log if most of it is dead (a full disk postpones it);
8. hold the store's space reserve again if it was released (:mod:`space_reserve`).

A failure (OSError, e.g. ENOSPC) at steps 1-4 leaves the previous checkpoint, which
describes data on disk; the next flush starts over. For want of space, steps 1-4 first
run once more with the room of the store's reserve: on a volume filled to its last
block the flush still writes the checkpoint that lets step 6 give space back. Not
thread-safe: the store's owner.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from delaybridge.durable import is_no_space
from delaybridge.timerlog.checkpoint import Checkpoint
from delaybridge.timerlog.marks import StoreMarks
from delaybridge.timerlog.reclaim import RECORD_PASS_SHORT_MS, Reclaimer
from delaybridge.timerlog.records import DeliveryCursor
from delaybridge.timerlog.space_reserve import SpaceReserve

if TYPE_CHECKING:
    from delaybridge.timerlog.store import TimerStore

LIVE_RECOMPUTE_MS = 30_000
"""How often a flush recomputes ``live_start`` (step 3): a pass over every slot, ~5 ms
for the default wheel, which would add that to every turn it falls in; a segment is
deleted up to this much later than it could be."""
IDLE_CHECKPOINT_MS = 10_000
"""How long a checkpoint that would only say time passed waits (step 4). Written at every
flush, it cost an idle sidecar two fsyncs per store and flush interval, the larger part
of its CPU. Waiting is safe: after a crash the store reopens with the cursor before the
empty ticks and reads them again (nothing in them), and the owner's changelog mark is
older by some progress records, which its restore reads again."""
log = logging.getLogger(__name__)


class Flusher:
    """Flushes one store; keeps ``live_start`` and the last checkpoint written."""

    def __init__(self, store: TimerStore, opened: Checkpoint, loaded: bool, now_ms: int) -> None:
        """``opened``: the checkpoint the store was opened at (``loaded``: read from
        disk, not a new store's first)."""
        self.store = store
        self.directory = store.directory
        self.commit_log = store.commit_log
        self.timer = store.timer
        self.wheel = store.wheel
        self.cancels = store.cancels
        self.reader = store.reader
        self._saved = opened if loaded else None
        self._saved_ms = now_ms
        """When the last checkpoint was written (or the store opened)."""
        self.live_start = opened.live_start
        """Timer-log index before which nothing is pending (older segments deletable)."""
        self._live_at_ms = now_ms
        self._live_done: DeliveryCursor | None = None
        """The delivery cursor ``live_start`` was last recomputed at."""
        self.space_short = False
        """The owner says the disk is short of space: recompute ``live_start`` and give
        back what was finished at every flush the cursor moved, not every 30 s."""
        self.reclaimer = Reclaimer(self.commit_log, self.timer)
        self._records_at_ms = now_ms - RECORD_PASS_SHORT_MS
        """When the inside of finished records was last given back (:mod:`reclaim`)."""
        self.marks = opened.marks
        """The owner's marks of the last checkpoint written (or opened)."""
        self._next_marks = opened.marks
        self.reserve = SpaceReserve(self.directory)
        self.reserve.take()

    def flush(self, now_ms: int, recompute_live: bool, marks: StoreMarks) -> None:
        """The module docstring's steps; the checkpoint carries ``marks``."""
        self._next_marks = marks
        try:
            periodic = self._checkpoint_steps(now_ms, recompute_live)
        except OSError as exc:
            if not is_no_space(exc) or not self.reserve.release():
                raise
            periodic = self._checkpoint_steps(now_ms, recompute_live)  # in the reserve's room
        done = self.reader.done
        self.commit_log.log.release_pages()  # 5
        self.timer.release_pages()
        records = periodic or (
            self.space_short and now_ms - self._records_at_ms >= RECORD_PASS_SHORT_MS
        )
        if records:
            self._records_at_ms = now_ms
        self.reclaimer.reclaim(self.live_start, done.tick_ms, records)  # 6
        if self.cancels.needs_compaction():  # 7
            self._compact_cancels()
        self.reserve.take()  # 8

    def _checkpoint_steps(self, now_ms: int, recompute_live: bool) -> bool:
        """Steps 1-4; returns whether ``live_start`` was recounted at its 30 s period
        (or on request), which also gives back the inside of finished records."""
        self.commit_log.sync()  # 1
        self.timer.sync()
        self.cancels.sync()
        self.timer.index.catch_up()
        done = self.reader.done
        self.cancels.forget_before(done.tick_ms)  # 2
        periodic = recompute_live or now_ms - self._live_at_ms >= LIVE_RECOMPUTE_MS
        eager = self.space_short and done != self._live_done
        if periodic or eager:  # 3
            from_ms = done.tick_ms
            if done.index + 1 >= self.wheel.list_of(done.tick_ms).length:
                from_ms += self.wheel.tick_ms  # the cursor's tick is read to its end
            _, min_first = self.wheel.live_summary(from_ms)
            self.live_start = self.timer.end if min_first is None else min_first
            self._live_at_ms = now_ms
            self._live_done = done
        self._save(now_ms, wait=not recompute_live)  # 4 (asked: as at a close, now)
        self.cancels.drop_old()
        return periodic

    def checkpoint(self) -> Checkpoint:
        """The checkpoint of the store as it is now."""
        store, done = self.store, self.reader.done
        return Checkpoint(
            tick_ms=store.settings.tick_ms,
            wheel_slots=store.settings.wheel_slots,
            commit_end=self.commit_log.end,
            timer_end=self.timer.end,
            live_start=self.live_start,
            done_tick_ms=done.tick_ms,
            done_index=done.index,
            cancel_generation=self.cancels.generation,
            cancel_end=self.cancels.end,
            last_source_offset=store.last_source_offset,
            pending_by_topic=store.pending_by_topic,
            marks=self._next_marks,
            counters=dataclasses.replace(store.counters),
        )

    def _save(self, now_ms: int, wait: bool = True) -> None:
        """Step 4; ``wait``: a checkpoint that would only say time passed may wait."""
        ckpt = self.checkpoint()
        saved = self._saved
        if ckpt == saved:
            return
        recent = saved is not None and now_ms - self._saved_ms < IDLE_CHECKPOINT_MS
        if wait and recent and saved is not None and _only_time_passed(saved, ckpt):
            return  # the marks stay those of the checkpoint on disk
        ckpt.save(self.directory)
        self._saved = ckpt
        self._saved_ms = now_ms
        self.marks = ckpt.marks

    def _compact_cancels(self) -> None:
        try:
            self.cancels.compact()
            self._save(self.store.clock.now_ms(), wait=False)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            log.warning("%s: cancel log not compacted, no room (%s)", self.directory, exc)
            return
        self.cancels.drop_old()


def _only_time_passed(saved: Checkpoint, now: Checkpoint) -> bool:
    """Does ``now`` differ from ``saved`` only in what moves with time alone: the delivery
    cursor over empty ticks (nothing was delivered: the counters are equal) and the
    owner's changelog mark (its progress records)? A new ``live_start`` is not time
    passing: step 6 deletes what the checkpoint before it still names. Nor is a first
    changelog mark: a store without one is taken for a stranger's and rebuilt."""
    if saved.marks.changelog is None and now.marks.changelog is not None:
        return False
    same_time = dataclasses.replace(
        now,
        done_tick_ms=saved.done_tick_ms,
        done_index=saved.done_index,
        marks=dataclasses.replace(now.marks, changelog=saved.marks.changelog),
    )
    return same_time == saved
