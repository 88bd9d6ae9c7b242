"""TimerStore: commit log + timer log + time wheel for one delay-topic partition.

The facade over :mod:`writer` (append: batch-encoded, placed and linked with
numpy, two ``pwrite`` calls), :mod:`reader` (take_due in bounded batches) and the
cancel book; no per-message state stays in memory. Cancel and lookup scan the live
timer log's ``id_hash`` column and confirm candidates on the commit log.

Durability: ``flush`` fsyncs the logs, then atomically replaces the checkpoint;
recovery (:mod:`recovery`) returns the store to exactly that checkpoint.

Not thread-safe: one owner thread calls every method; there are no locks.
"""

from __future__ import annotations

import os
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from delaybridge.timerlog.checkpoint import Checkpoint
from delaybridge.timerlog.clock import SYSTEM_CLOCK, Clock
from delaybridge.timerlog.commit_codec import encode_batch
from delaybridge.timerlog.errors import DelayTooLong
from delaybridge.timerlog.reader import Reader
from delaybridge.timerlog.records import DeliveryCursor, DueRecord, TimerRecord
from delaybridge.timerlog.recovery import Opened, recover
from delaybridge.timerlog.settings import StoreSettings
from delaybridge.timerlog.stats import StoreStats
from delaybridge.timerlog.timer_codec import EntryType
from delaybridge.timerlog.writer import Writer

I64 = npt.NDArray[np.int64]
LIVE_RECOMPUTE_MS = 5_000


class TimerStore:
    """The store of one delay-topic partition. Open it with :meth:`open`.

    Not thread-safe: one owner thread calls every method (no locks in the hot path).
    """

    def __init__(self, directory: Path, settings: StoreSettings, clock: Clock,
                 opened: Opened) -> None:
        self.directory = directory
        self.settings = settings
        self.clock = clock
        self._lock_fd = opened.lock_fd
        self.commit = opened.commit
        self.timer = opened.timer
        self.wheel = opened.wheel
        self.cancels = opened.cancels
        self.wheel_rebuilt = opened.wheel_rebuilt
        ck = opened.checkpoint
        self._live_start = ck.live_start
        self._live_at_ms = clock.now_ms()
        self._last_source_offset = ck.last_source_offset
        self._appended = ck.appended_total
        self._delivered = ck.delivered_total
        self._cancelled = ck.cancelled_total
        self._unknown_cancels = ck.unknown_cancels_total
        self._rolled = ck.rolled_total
        self._pending: Counter[str] = Counter(ck.pending_by_topic)
        done = DeliveryCursor(ck.done_tick_ms, ck.done_index)
        self.writer = Writer(self.commit, self.timer, self.wheel, settings)
        self.reader = Reader(self.timer, self.commit, self.wheel, self.cancels,
                             settings.tick_ms, done, self._write_rolls)
        self.writer.reader = self.reader
        self._closed = False

    @classmethod
    def open(cls, directory: Path, settings: StoreSettings,
             clock: Clock = SYSTEM_CLOCK, *, verify_commit_log: bool = False) -> TimerStore:
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
    def append(self, records: Sequence[TimerRecord]) -> None:
        """Store a batch; due times in the past are due at once. Durable after flush().

        Raises DelayTooLong (nothing stored) if a record is due more than
        ``max_delay_ms`` after now; the sidecar validates first and dead-letters.
        """
        if not records:
            return
        n = len(records)
        now = self.clock.now_ms()
        enc = encode_batch(records)
        due = np.array(enc.due_ms, dtype=np.int64)
        late = int(due.max()) - now
        if late > self.settings.max_delay_ms:
            worst = records[int(due.argmax())]
            raise DelayTooLong(
                f"record {worst.id!r} (source offset {worst.source_offset}) is due in "
                f"{late} ms, above max_delay_ms={self.settings.max_delay_ms}"
            )
        cl_pos = self.commit.append_encoded(enc.parts, enc.sizes)
        slot, kinds = self.writer.place(due, self.reader.done.tick_ms, EntryType.MESSAGE)
        first = self.writer.link_and_write(slot, kinds, np.array(enc.id_hashes, np.uint32),
                                           cl_pos)
        self._appended += n
        self._pending.update(enc.topics)
        self._last_source_offset = max(self._last_source_offset, enc.max_source_offset)
        if self.cancels.waiting:
            self._apply_waiting(records, first, slot)

    def _write_rolls(self, indexes: list[int], cl_positions: list[int], floor_tick_ms: int) -> None:
        """Copy rolled messages forward (called by the reader, see writer.copy_forward)."""
        self._rolled += self.writer.copy_forward(indexes, cl_positions, floor_tick_ms)

    # -- cancel and lookup ------------------------------------------------------
    def cancel(self, ids: Sequence[tuple[str, str | None]]) -> list[bool]:
        """Cancel messages by (id, target topic or None); True where a pending one matched.

        With a topic, only a message with that id *and* that target topic matches
        (an id colliding on another topic cancels nothing). An unmatched cancel waits
        ``cancel_grace_ms`` for its message (it may arrive later from another
        partition) and is then counted as unknown. Durable after flush().
        """
        now = self.clock.now_ms()
        self._expire(now)
        result = [False] * len(ids)
        candidates = self._scan({zlib.crc32(i.encode()) for i, _ in ids})
        for j, (rid, topic) in enumerate(ids):
            for index, slot_ms, cl_pos in candidates.get(zlib.crc32(rid.encode()), ()):
                if index in self.cancels.applied or not self.reader.is_pending(index, slot_ms):
                    continue
                rec = self.commit.read(cl_pos)
                if rec.id != rid or (topic is not None and rec.target_topic != topic):
                    continue
                self.cancels.apply(index, slot_ms)
                self._cancelled += 1
                self._pending[rec.target_topic] -= 1
                result[j] = True
            if not result[j]:
                if self.settings.cancel_grace_ms > 0:
                    self.cancels.wait(rid, topic, now + self.settings.cancel_grace_ms)
                else:
                    self._unknown_cancels += 1
        self.cancels.write_pending()
        return result

    def _apply_waiting(self, records: Sequence[TimerRecord], first: int, slot: I64) -> None:
        waiting = self.cancels.waiting
        for j, r in enumerate(records):
            if r.id in waiting and self.cancels.take_waiting(r.id, r.target_topic):
                self.cancels.apply(first + j, int(slot[j]))
                self._cancelled += 1
                self._pending[r.target_topic] -= 1
        self.cancels.write_pending()

    def _expire(self, now: int) -> None:
        self._unknown_cancels += self.cancels.expire(now)

    def _scan(self, hashes: set[int]) -> dict[int, list[tuple[int, int, int]]]:
        return self.timer.find_ids(self._live_start, hashes)

    def lookup(self, id: str) -> TimerRecord | None:
        """The pending message with this id, or None. Scans the live timer log."""
        for index, slot_ms, cl_pos in self._scan({zlib.crc32(id.encode())}).get(
                zlib.crc32(id.encode()), ()):
            if index in self.cancels.applied or not self.reader.is_pending(index, slot_ms):
                continue
            rec = self.commit.read(cl_pos)
            if rec.id == id:
                return rec
        return None

    # -- reading ----------------------------------------------------------------
    def take_due(self, max_records: int) -> list[DueRecord]:
        """Up to ``max_records`` due messages: due tick ascending, then arrival order.

        Successive calls continue where the last one stopped; cancelled and
        committed messages never come back. A huge tick streams out in bounded
        batches. Returns [] while a roll waits for in-flight deliveries to be
        committed (see :mod:`reader`).
        """
        out = self.reader.take_due(max_records, self.clock.now_ms())
        return out

    def next_due_ms(self) -> int | None:
        """Earliest time something may be due (<= now: call take_due); None: nothing pending."""
        return self.reader.next_due_ms()

    def commit_delivered(self, cursor: DeliveryCursor) -> None:
        """Everything handed out up to ``cursor`` was delivered; durable at the next flush.

        After a restart, take_due resumes after the last *flushed* cursor, so only
        messages handed out but not committed-and-flushed are delivered again.
        """
        done = self.reader.commit(cursor)
        self._delivered += len(done)
        self._pending.subtract(Counter([d.record.target_topic for d in done]))

    # -- durability -------------------------------------------------------------
    @property
    def last_source_offset(self) -> int:
        """Highest source offset appended, -1 if none (durable once flush() returns)."""
        return self._last_source_offset

    def flush(self, *, recompute_live: bool = False) -> None:
        """fsync data, then write the checkpoint: everything before this call is durable."""
        now = self.clock.now_ms()
        self._expire(now)
        self.commit.sync()
        self.timer.sync()
        self.cancels.sync()
        done = self.reader.done
        self.cancels.forget_before(done.tick_ms)
        if recompute_live or now - self._live_at_ms >= LIVE_RECOMPUTE_MS:
            from_ms = done.tick_ms
            if done.index + 1 >= self.wheel.list_of(done.tick_ms)[0]:
                from_ms += self.settings.tick_ms  # the cursor's tick is read to its end
            _, min_first = self.wheel.live_summary(from_ms)
            self._live_start = self.timer.end if min_first is None else min_first
            self._live_at_ms = now
        self._checkpoint().save(self.directory)
        self.release_pages()  # mapped log pages read since the last flush leave our RSS
        if self._live_start < self.timer.end:
            cl_start = self.timer.entry(self._live_start)[3]
        else:
            cl_start = self.commit.end
        if self.timer.delete_before(self._live_start) + self.commit.delete_before(cl_start):
            self.timer.sync()
            self.commit.sync()
        if self.cancels.needs_compaction():
            self.cancels.compact()
            self._checkpoint().save(self.directory)
            self.cancels.drop_old()

    def _checkpoint(self) -> Checkpoint:
        done = self.reader.done
        return Checkpoint(
            tick_ms=self.settings.tick_ms,
            wheel_slots=self.settings.wheel_slots,
            commit_end=self.commit.end,
            timer_end=self.timer.end,
            live_start=self._live_start,
            done_tick_ms=done.tick_ms,
            done_index=done.index,
            cancel_generation=self.cancels.generation,
            cancel_end=self.cancels.end,
            last_source_offset=self._last_source_offset,
            appended_total=self._appended,
            delivered_total=self._delivered,
            cancelled_total=self._cancelled,
            unknown_cancels_total=self._unknown_cancels,
            rolled_total=self._rolled,
            pending_by_topic={t: c for t, c in self._pending.items() if c},
        )

    def stats(self) -> StoreStats:
        """Counters for metrics and the admin API (cheap except bytes_on_disk's stats)."""
        now = self.clock.now_ms()
        self._expire(now)
        nxt = self.reader.next_due_ms()
        files = [self.directory / "wheel", self.directory / "checkpoint"]
        extra = sum(os.stat(f).st_blocks * 512 for f in files if f.exists())
        return StoreStats(
            pending=sum(self._pending.values()),
            pending_by_topic={t: c for t, c in self._pending.items() if c},
            bytes_on_disk=self.commit.log.bytes_on_disk() + self.timer.log.bytes_on_disk()
            + self.cancels.bytes_on_disk() + extra,
            read_lag_ms=max(0, now - nxt) if nxt is not None else 0,
            appended_total=self._appended,
            delivered_total=self._delivered,
            cancelled_total=self._cancelled,
            unknown_cancels_total=self._unknown_cancels,
            waiting_cancels=self.cancels.waiting_count(),
            rolled_total=self._rolled,
            commit_segments=len(self.commit.log.segments),
            timer_segments=len(self.timer.log.segments),
            last_source_offset=self._last_source_offset,
        )

    def release_pages(self) -> None:
        """Drop mapped log pages from this process's RSS (they stay in the page cache)."""
        self.commit.log.release_pages()
        self.timer.log.release_pages()

    def close(self) -> None:
        """Flush, stamp the wheel clean, release files and maps."""
        if self._closed:
            return
        self.flush(recompute_live=True)
        self.wheel.set_stamp(self.timer.end + 1)
        self._closed = True
        for part in (self.commit, self.timer, self.cancels, self.wheel):
            part.close()
        os.close(self._lock_fd)

    def _abandon_for_benchmark(self) -> None:
        """Drop the store like a crash would (no flush, no clean stamp): benchmarks."""
        for part in (self.commit, self.timer, self.cancels, self.wheel):
            part.close()
        os.close(self._lock_fd)
        self._closed = True

    def __enter__(self) -> TimerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
