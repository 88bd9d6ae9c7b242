"""The delivery side of a store: walk the wheel tick by tick and hand out due messages.

State is a position ``(tick, next)``: the tick being read and the ordinal of the
next entry of its list. The list of the current tick is collected once (24 bytes
per entry) and then read in order, in bounded batches. It cannot change while it
is read: appends never target the tick being read (see :mod:`placement`).

Three cursors matter for at-least-once delivery:

* ``handed`` -- the last cursor returned by :meth:`take_due`;
* ``done`` -- everything at or before it is finished (delivered *and committed*,
  cancelled and skipped, or rolled forward); this is what the checkpoint stores,
  so after a crash only the handed-but-uncommitted messages are read again;
* the in-flight queue between them, one (cursor, topic) per uncommitted message.

A ROLL entry is processed only when nothing is in flight: rolling writes a copy,
and ``done`` must cover the roll in the same checkpoint that covers the copy, or a
crash would roll (and later deliver) the message twice.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from delaybridge.timerlog.cancels import CancelBook
from delaybridge.timerlog.commit_codec import FIELDS
from delaybridge.timerlog.commit_log import SOURCE_OFFSET_OFFSET, CommitLog
from delaybridge.timerlog.records import DeliveryCursor, DueRecord
from delaybridge.timerlog.timer_codec import EntryType
from delaybridge.timerlog.timer_log import TimerLog
from delaybridge.wheel import TimingWheel

I64 = npt.NDArray[np.int64]
EMPTY = np.empty(0, dtype=np.int64)
ROLL = int(EntryType.ROLL)
ROLLED = int(EntryType.ROLLED)
_Q = struct.Struct("<q")
assert FIELDS.size > 16

RollWriter = Callable[[list[int], list[int], int], None]
"""write_rolls(timer indexes, commit positions, floor tick): copy messages forward."""


class Reader:
    """Hands out due messages in order and tracks what is done."""

    def __init__(self, timer: TimerLog, commit: CommitLog, wheel: TimingWheel,
                 cancels: CancelBook, tick_ms: int, done: DeliveryCursor,
                 write_rolls: RollWriter) -> None:
        self.timer = timer
        self.clog = commit
        self.wheel = wheel
        self.cancels = cancels
        self.tick_ms = tick_ms
        self.tick = done.tick_ms
        self.next = done.index + 1
        self.done = done
        self.handed: DeliveryCursor | None = None
        self.inflight: deque[tuple[DeliveryCursor, str]] = deque()
        self.cancelled_skipped = 0
        self._write_rolls = write_rolls
        self._idx: I64 | None = None
        self._count = 0
        self._cl: I64 = EMPTY
        self._kinds: I64 = EMPTY
        self._upcoming: deque[int] = deque()
        self._scanned_to = self.tick
        self._hint: int | None = None
        self._hint_valid = False

    # -- the current tick's list ------------------------------------------------
    def _load(self) -> I64:
        count, _, last = self.wheel.list_of(self.tick)
        self._count = count
        if self.next >= count:  # read before a restart; its entries may be deleted
            self._idx, self._cl, self._kinds = EMPTY, EMPTY, EMPTY
            return EMPTY
        idx, cl, kinds = self.timer.chase(last, count)
        if (kinds == ROLLED).any():
            # Rolled copies were written after younger messages of the same tick;
            # source offsets restore arrival order (stable, ties by position).
            offsets = np.fromiter((self._source_offset(int(p)) for p in cl), np.int64, count)
            order = np.lexsort((idx, offsets))
            idx, cl, kinds = idx[order], cl[order], kinds[order]
        self._idx, self._cl, self._kinds = idx, cl, kinds
        return idx

    def _source_offset(self, cl_pos: int) -> int:
        seg, off = self.clog.log.locate(cl_pos)
        value: int = _Q.unpack_from(seg.map(), off + SOURCE_OFFSET_OFFSET)[0]
        return value

    def _enter(self, tick: int) -> None:
        self.tick, self.next, self._idx = tick, 0, None
        if not self.inflight:
            self.done = DeliveryCursor(tick, -1)
        if self._hint_valid and self._hint is not None and tick >= self._hint:
            self._hint_valid = False

    def _advance(self, now_tick: int) -> None:
        """Move to the next non-empty tick at or before ``now_tick`` (or to ``now_tick``)."""
        while self._upcoming and self._upcoming[0] <= self.tick:
            self._upcoming.popleft()
        if self._upcoming and self._upcoming[0] <= now_tick:
            self._enter(self._upcoming.popleft())
            return
        start = max(self.tick, self._scanned_to) + self.tick_ms
        if (now_tick - start) // self.tick_ms > self.wheel.n_slots:
            earliest, _ = self.wheel.live_summary(start)  # long idle: one full pass
            self._upcoming.clear()
            self._scanned_to = self.tick
            self._enter(earliest if earliest is not None and earliest <= now_tick else now_tick)
            return
        while start <= now_tick:
            hits = self.wheel.next_ticks(start, now_tick)
            scanned = min((now_tick - start) // self.tick_ms + 1, 8192)
            self._scanned_to = start + (scanned - 1) * self.tick_ms
            if hits:
                self._upcoming.extend(hits)
                self._enter(self._upcoming.popleft())
                return
            start = self._scanned_to + self.tick_ms
        self._enter(now_tick)

    def placed(self, min_slot_ms: int) -> None:
        """The store linked entries at ``min_slot_ms`` or later (after the read tick)."""
        if min_slot_ms <= self._scanned_to:
            self._upcoming.clear()
            self._scanned_to = self.tick
        if self._hint_valid and (self._hint is None or min_slot_ms < self._hint):
            self._hint = min_slot_ms

    # -- delivery -------------------------------------------------------------
    def take_due(self, max_records: int, now_ms: int) -> list[DueRecord]:
        out: list[DueRecord] = []
        now_tick = now_ms // self.tick_ms * self.tick_ms
        if self.tick > now_tick:
            return out
        applied = self.cancels.applied
        read = self.clog.read
        inflight = self.inflight
        roll_idx: list[int] = []
        roll_cl: list[int] = []
        half_window = self.wheel.n_slots // 2 * self.tick_ms
        while len(out) < max_records:
            idx = self._idx if self._idx is not None else self._load()
            i = self.next
            if i >= self._count:
                limit = now_tick
                if inflight:  # keep room in the wheel for new messages (see placement)
                    limit = min(limit, self.done.tick_ms + half_window)
                if self.tick >= limit:
                    break
                self._flush_rolls(roll_idx, roll_cl)
                self._advance(limit)
                continue
            k = int(idx[i])
            if k in applied:
                del applied[k]
                self.cancelled_skipped += 1
            elif self._kinds[i] == ROLL:
                if inflight:
                    break
                roll_idx.append(k)
                roll_cl.append(int(self._cl[i]))
            else:
                rec = read(int(self._cl[i]))
                cur = DeliveryCursor(self.tick, i)
                out.append(DueRecord(rec, cur))
                inflight.append((cur, rec.target_topic))
            self.next = i + 1
        self._flush_rolls(roll_idx, roll_cl)
        if not inflight:
            self.done = DeliveryCursor(self.tick, self.next - 1)
        if out:
            self.handed = out[-1].cursor
        return out

    def _flush_rolls(self, roll_idx: list[int], roll_cl: list[int]) -> None:
        if roll_idx:
            self._write_rolls(roll_idx, roll_cl, self.tick)
            roll_idx.clear()
            roll_cl.clear()

    def commit(self, cursor: DeliveryCursor) -> list[str]:
        """Mark everything up to ``cursor`` delivered; returns the delivered topics."""
        if self.handed is None or cursor > self.handed:
            raise ValueError(f"cursor {cursor} was never handed out (last: {self.handed})")
        topics: list[str] = []
        inflight = self.inflight
        while inflight and inflight[0][0] <= cursor:
            topics.append(inflight.popleft()[1])
        if inflight:
            self.done = max(self.done, cursor)
        else:
            self.done = DeliveryCursor(self.tick, self.next - 1)
        return topics

    # -- questions -------------------------------------------------------------
    def has_due_now(self) -> bool:
        if self._idx is None:
            self._load()
        return self.next < self._count

    def next_due_ms(self) -> int | None:
        if self.has_due_now():
            return self.tick
        if self._upcoming:
            return self._upcoming[0]
        if not self._hint_valid:
            self._hint, _ = self.wheel.live_summary(self.tick + self.tick_ms)
            self._hint_valid = True
        return self._hint

    def is_pending(self, index: int, slot_ms: int) -> bool:
        """Is the entry still ahead of the read position (not handed out or skipped)?"""
        if slot_ms != self.tick:
            return slot_ms > self.tick
        idx = self._idx if self._idx is not None else self._load()
        if self.next >= self._count:
            return False
        where = np.flatnonzero(idx == index)
        return bool(where.size) and int(where[0]) >= self.next
