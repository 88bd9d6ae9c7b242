"""TimerStore: commit log + timer log + time wheel for one delay-topic partition.

The facade over :mod:`writer` (append: batch-encoded, placed and linked with
numpy, two ``pwrite`` calls), :mod:`reader` (take_due in bounded batches) and
:mod:`matching` (cancel and lookup: a search of the timer log's id index -- sorted
runs of ``(id_hash, row)`` in ``.tidx`` files beside the segments, :mod:`id_index` --
candidates confirmed on the commit log); no per-message state stays in memory.

Durability: ``flush`` fsyncs the logs, then atomically replaces the checkpoint;
recovery (:mod:`recovery`) returns the store to exactly that checkpoint.

Not thread-safe: one owner thread calls every method; there are no locks.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from delaybridge.durable import allocated_bytes, is_no_space
from delaybridge.timerlog.clock import SYSTEM_CLOCK, Clock
from delaybridge.timerlog.commit_codec import encode_batch, index_encoded
from delaybridge.timerlog.durability import Flusher
from delaybridge.timerlog.errors import DelayTooLong
from delaybridge.timerlog.marks import StoreMarks
from delaybridge.timerlog.matching import IdMatcher, Pending
from delaybridge.timerlog.prefix_sweep import Count
from delaybridge.timerlog.quarantine import Quarantine
from delaybridge.timerlog.reader import Reader
from delaybridge.timerlog.records import (
    Cancel,
    DeliveryCursor,
    DueRecord,
    EncodedBatch,
    TimerRecord,
    topics_of,
)
from delaybridge.timerlog.recovery import Opened, recover
from delaybridge.timerlog.replace_waits import ReplaceWaits
from delaybridge.timerlog.settings import StoreSettings
from delaybridge.timerlog.stats import StoreCounters, StoreStats
from delaybridge.timerlog.timer_entry import EntryType
from delaybridge.timerlog.writer import Writer

log = logging.getLogger(__name__)


class TimerStore:
    """The store of one delay-topic partition (:meth:`open`); one owner thread, no locks."""

    def __init__(
        self, directory: Path, settings: StoreSettings, clock: Clock, opened: Opened
    ) -> None:
        self.directory = directory
        self.settings = settings
        self.clock = clock
        self._lock_fd = opened.lock_fd
        self.commit_log = opened.commit_log
        self.timer = opened.timer
        self.wheel = opened.wheel
        self.cancels = opened.cancels
        self.wheel_rebuilt = opened.wheel_rebuilt
        self.rescued = opened.rescued  # opened without a usable checkpoint (:mod:`rescue`)
        ck = opened.checkpoint
        self._last_source_offset = ck.last_source_offset
        self.counters: StoreCounters = ck.counters
        """Running totals (saved in every checkpoint, copied into :meth:`stats`)."""
        self._pending: Counter[str] = Counter(ck.pending_by_topic)
        done = DeliveryCursor(ck.done_tick_ms, ck.done_index)
        self.writer = Writer(self.commit_log, self.timer, self.wheel, settings)
        self.reader = Reader(
            self.timer,
            self.commit_log,
            self.wheel,
            self.cancels,
            settings.tick_ms,
            done,
            self._write_rolls,
            Quarantine(self.commit_log, self.counters),
        )
        self.writer.reader = self.reader
        self._matcher = IdMatcher(
            self.timer,
            self.commit_log,
            self.reader,
            self.cancels,
            settings.cancel_grace_ms,
            self.counters,
            self._pending,
        )
        self._flusher = Flusher(self, ck, opened.checkpoint_loaded, clock.now_ms())
        self._closed = False
        for waiting in self.cancels.prefixes:  # a sweep cut short by a restart: again
            self._matcher.sweeps.start(waiting.cancel, self._flusher.live_start)

    @classmethod
    def open(
        cls,
        directory: Path,
        settings: StoreSettings,
        clock: Clock = SYSTEM_CLOCK,
        *,
        verify_commit_log: bool = False,
    ) -> TimerStore:
        """Create the store in ``directory`` or recover it to its last flush.

        Raises ConfigError naming ``tick_ms`` or ``wheel_slots`` when they differ from
        the files, IntegrityError (file + offset) when flushed data is damaged.
        ``verify_commit_log`` also checks every live commit-log record's CRC (slow
        for big stores; otherwise each record is checked when it is read).
        """
        settings.validate()
        opened = recover(directory, settings, clock.now_ms(), verify_commit_log)
        return cls(directory, settings, clock, opened)

    # -- writing --------------------------------------------------------------
    def append(self, records: Sequence[TimerRecord]) -> EncodedBatch:
        """Store a batch; due times in the past are due at once. Durable after flush().

        Returns the batch as encoded (``records()``, what a changelog carries; and
        ``positions``). Raises DelayTooLong (nothing stored) if a record is due more than
        ``max_delay_ms`` after now; the sidecar validates first and dead-letters."""
        return self._append(encode_batch(records), records)

    def append_raw(self, raws: Sequence[bytes], *, skip: int = 0) -> EncodedBatch:
        """Store records that arrive encoded, each ``skip`` bytes into its buffer (a
        changelog value): indexed, not re-encoded (``commit_record.index_encoded``)."""
        return self._append(index_encoded(raws, str(self.directory), skip), None)

    def _append(self, enc: EncodedBatch, records: Sequence[TimerRecord] | None) -> EncodedBatch:
        n = len(enc.sizes)
        if not n:
            return enc
        now = self.clock.now_ms()
        due = np.array(enc.due_ms, dtype=np.int64)
        late = int(due.max()) - now
        if late > self.settings.max_delay_ms:
            worst = int(due.argmax())
            what = repr(records[worst].id) if records is not None else f"number {worst}"
            raise DelayTooLong(
                f"record {what} of the batch is due in {late} ms, "
                f"above max_delay_ms={self.settings.max_delay_ms}"
            )
        hashes = np.array(enc.id_hashes, np.uint32)
        first, slot, cl_pos = self.writer.write(
            enc.parts, enc.sizes, due, hashes, self.reader.done.tick_ms, EntryType.MESSAGE
        )  # all or nothing: OSError (a full disk) leaves the store as it was
        enc.positions = cl_pos
        self.counters.appended_total += n
        self._pending.update(enc.topics)
        self._last_source_offset = max(self._last_source_offset, enc.max_source_offset)
        if self._matcher.watching():
            self._matcher.on_append(records, cl_pos, first, slot, hashes, self.clock.now_ms())
        return enc

    def share_replace_waits(self, waits: ReplaceWaits, own: tuple[str, int]) -> None:
        """Replaces wait in ``waits`` (:mod:`replace_waits`); ``own``: this partition."""
        self._matcher.share(waits, own, self.clock.now_ms())

    def remove(
        self, keys: Sequence[tuple[str, int, int]], generation_of: Callable[[TimerRecord], int]
    ) -> int:
        """Drop pending messages by key: (id, source offset, generation), the generation
        as ``generation_of`` reads it from a record. Returns how many were dropped; a key
        not pending is ignored. Durable after flush()."""
        return self._matcher.remove(keys, generation_of, self._flusher.live_start)

    def pending_records(self, chunk: int = 10_000, since: int = 0) -> Iterator[list[Pending]]:
        """Pending messages as (commit-log position, record) from ``since``, in chunks."""
        return self._matcher.pending_records(self._flusher.live_start, chunk, since)

    def take_removed(self) -> list[TimerRecord]:
        """The pending messages cancels removed since the last call (so the owner can
        tell its changelog), oldest first."""
        removed, self._matcher.removed = self._matcher.removed, []
        return removed

    def _write_rolls(
        self, indexes: list[int], cl_positions: list[int], floor_tick_ms: int
    ) -> list[tuple[int, str]]:
        """Copy rolled messages forward (called by the reader, see writer.copy_forward)."""
        copied, damaged = self.writer.copy_forward(indexes, cl_positions, floor_tick_ms)
        self.counters.rolled_total += copied
        return damaged

    # -- cancel and lookup (matching.py) ---------------------------------------
    def cancel(self, cancels: Sequence[Cancel | tuple[str, str | None]]) -> list[bool]:
        """Apply cancels (:class:`Cancel`, or ``(id, topic or None)`` pairs) to the pending
        messages they apply to (:meth:`Cancel.applies_to`: id, topic if named, sent
        before); True where one matched. A cancel with a send time then waits
        ``cancel_grace_ms`` for more (see :mod:`matching`). Durable after flush()."""
        wanted = [c if isinstance(c, Cancel) else Cancel(*c) for c in cancels]
        return self._matcher.cancel(wanted, self.clock.now_ms(), self._flusher.live_start)

    def sweep(self, budget: int) -> int:
        """Run the cancels by id prefix (:class:`Cancel` with ``prefix``, applied with
        :meth:`cancel`) over up to ``budget`` more timer-log entries; returns how many
        messages they took (:meth:`take_removed` lists them). The owner calls it once
        per loop turn while :attr:`sweeping` (:mod:`prefix_sweep`). Durable after flush()."""
        return self._matcher.sweep(budget, self._flusher.live_start)

    @property
    def sweeping(self) -> bool:
        """Is a cancel by id prefix still walking this store?"""
        return bool(self._matcher.sweeps.running)

    def count_prefix(self, cancel: Cancel, cap: int | None = None) -> int:
        """How many pending messages the prefix cancel ``cancel`` would take now (the
        same rule as :meth:`cancel`), counting no further than ``cap + 1``: a whole
        vectorized pass over the live timer log at once (tools, tests; the sidecar
        counts a step per loop turn: :meth:`start_count`)."""
        return self._matcher.count_prefix(cancel, self._flusher.live_start, cap)

    def start_count(self, cancel: Cancel, cap: int | None = None) -> Count:
        """A count of :meth:`count_prefix`, to run a step at a time (:meth:`count_step`)."""
        return Count(cancel, self._flusher.live_start, None if cap is None else cap + 1)

    def count_step(self, count: Count, budget: int) -> int:
        """Advance ``count`` over up to ``budget`` timer-log entries (``count.done`` when
        finished); returns the entries examined. Same answer as :meth:`count_prefix`,
        without a whole pass on one turn."""
        return self._matcher.count_step(count, budget, self._flusher.live_start)

    def lookup(self, id: str) -> TimerRecord | None:
        """The pending message with this id, or None (a search of the id index)."""
        return self._matcher.lookup(id, self._flusher.live_start)

    def pending_with_ids(self, ids: set[str]) -> dict[str, list[TimerRecord]]:  # by id
        return self._matcher.pending_with_ids(ids, self._flusher.live_start)

    # -- reading ----------------------------------------------------------------
    def take_due(self, max_records: int, until_ms: int | None = None) -> list[DueRecord]:
        """Up to ``max_records`` due messages: due tick ascending, then arrival order;
        due by ``until_ms`` if it is given and before now (the owner's cancel horizon).

        Successive calls continue where the last one stopped; cancelled messages and
        those marked delivered never come back (nor one a prefix cancel still sweeping
        applies to: cancelled as it falls due). A huge tick streams out in bounded
        batches. Returns [] while a roll waits for in-flight deliveries to be marked
        delivered (see :mod:`reader`).
        """
        now_ms = self.clock.now_ms()
        if until_ms is not None and until_ms < now_ms:
            now_ms = until_ms
        due = self.reader.take_due(max_records, now_ms)
        if due and self._matcher.screening():
            self._matcher.screen(due, self._flusher.live_start)  # prefix_sweep.py
            if not due:  # all cancelled: the reader's in-flight batch is gone
                self.reader.inflight.pop()
        return due

    @property
    def delivered_through_ms(self) -> int:
        """The delivery cursor's tick: nothing due up to it is handed out again."""
        return self.reader.done.tick_ms

    def next_due_ms(self, until_ms: int | None = None) -> int | None:
        """Earliest time something may be due (<= now: take_due); None: none (up to until_ms)."""
        return self.reader.next_due_ms(until_ms)

    def mark_delivered(self, cursor: DeliveryCursor) -> None:
        """Everything handed out up to ``cursor`` was delivered; durable at the next flush.

        After a restart, take_due resumes after the last *flushed* cursor, so only
        messages handed out but not marked delivered before a flush come again.
        """
        done = self.reader.mark_delivered(cursor)
        self.counters.delivered_total += len(done)
        self._pending.subtract(Counter(topics_of(done)))

    # -- durability -------------------------------------------------------------
    @property
    def last_source_offset(self) -> int:
        """Highest source offset appended, -1 if none (durable once flush() returns)."""
        return self._last_source_offset

    @property
    def marks(self) -> StoreMarks:
        """The owner's marks as of the last flush (or the checkpoint it was opened at):
        exactly as durable as the data they describe (``timerlog/marks.py``)."""
        return self._flusher.marks

    def flush(self, marks: StoreMarks | None = None, *, recompute_live: bool = False) -> None:
        """fsync data, then write the checkpoint with ``marks`` (None: the current ones):
        everything before this call is durable (the steps: :mod:`durability`). OSError (a
        full disk) leaves the last checkpoint, and the marks with it."""
        now = self.clock.now_ms()
        self._matcher.expire(now)
        self._flusher.flush(now, recompute_live, self.marks if marks is None else marks)

    @property
    def space_short(self) -> bool:
        """Is the disk short of space (the owner's flow control says so)?"""
        return self._flusher.space_short

    @space_short.setter
    def space_short(self, short: bool) -> None:
        """While the disk is short of space, every flush that finds the delivery cursor
        moved gives back the space of what was finished since (:mod:`reclaim`), instead
        of once every ``LIVE_RECOMPUTE_MS`` (30 s). Costs a pass over the wheel's slots
        in use per such flush, and one over the live timer entries when the live records
        average two blocks or more."""
        self._flusher.space_short = short

    @property
    def pending_by_topic(self) -> dict[str, int]:
        """Pending messages per target topic (topics with none left out)."""
        return {t: c for t, c in self._pending.items() if c}

    def stats(self, disk: bool = True) -> StoreStats:
        """Counters for metrics and the admin API, cheap except ``bytes_on_disk``: a
        ``stat`` of every file of the store, skipped (0) with ``disk=False``."""
        now = self.clock.now_ms()
        self._matcher.expire(now)
        nxt = self.reader.next_due_ms(until_ms=now)
        return StoreStats(
            **dataclasses.asdict(self.counters),
            pending=sum(self._pending.values()),
            pending_by_topic=self.pending_by_topic,
            bytes_on_disk=self._bytes_on_disk() if disk else 0,
            read_lag_ms=max(0, now - nxt) if nxt is not None else 0,
            waiting_cancels=self.cancels.waiting_count(),
            commit_segments=len(self.commit_log.log.segments),
            timer_segments=len(self.timer.log.segments),
            last_source_offset=self._last_source_offset,
        )

    def _bytes_on_disk(self) -> int:
        files = [
            self.directory / "wheel",
            self.directory / "checkpoint",
            self._flusher.reserve.path,
        ]
        extra = sum(allocated_bytes(f) for f in files if f.exists())
        logs = sum(p.bytes_on_disk() for p in (self.commit_log.log, self.timer.log))
        return logs + self.cancels.bytes_on_disk() + self.timer.index.bytes_on_disk() + extra

    def release_pages(self) -> None:
        """Drop mapped log pages from this process's RSS (they stay in the page cache)."""
        self.commit_log.log.release_pages()
        self.timer.release_pages()

    def close(self) -> None:
        """Flush, stamp the wheel clean, release files and maps. On a full disk, released
        as by :meth:`abandon` with a warning (it reopens at its last checkpoint)."""
        if self._closed:
            return
        try:
            self.flush(recompute_live=True)
            self.wheel.set_stamp(self.timer.end + 1)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            log.warning(
                "%s: closed without its last flush, no room (%s); it reopens at "
                "its last checkpoint",
                self.directory,
                exc,
            )
        finally:
            self._release()

    def abandon(self) -> None:
        """Drop the store like kill -9 would: no flush, no clean stamp.

        Files and the lock are released, so the directory can be opened again at once;
        that open takes the crash path (recovery to the last flush, wheel rebuilt). For
        crash tests and the store benchmark; a closed store ignores it."""
        if not self._closed:
            self._release()

    def _release(self) -> None:
        self._closed = True
        for part in (self.commit_log, self.timer, self.cancels, self.wheel):
            part.close()
        os.close(self._lock_fd)

    def __enter__(self) -> TimerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
