"""The delivery side of a store: walk the wheel tick by tick and hand out due messages.

The read position is a cursor ``(tick, ordinal)``. The reader holds a *window*
(:mod:`read_window`): the collected lists of the next non-empty ticks up to the clock,
and iterates it flat, in bounded batches, so ticks cost nothing in Python. Appends
never target the tick being read (see :mod:`placement`); when they land on a later
tick inside the window, the window is cut back before that tick and reloaded later.

Three cursors matter for at-least-once delivery:

* ``handed`` -- the last cursor returned by :meth:`take_due`;
* ``done`` -- everything at or before it is finished (delivered *and marked so* with
  :meth:`Reader.mark_delivered`, cancelled and skipped, or rolled forward); this is
  what the checkpoint stores, so after a crash only the messages handed out and not
  marked delivered are read again;
* the in-flight batches between them.

A ROLL entry is processed only when nothing is in flight: rolling writes a copy,
and ``done`` must cover the roll in the same checkpoint that covers the copy, or a
crash would roll (and later deliver) the message twice. While in-flight messages
are in flight the reader also stays within half a window of ``done``.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from functools import partial

import numpy as np

from delaybridge.durable import is_no_space
from delaybridge.errors import IntegrityError
from delaybridge.timerlog import read_pass, read_window
from delaybridge.timerlog.cancels import CancelBook
from delaybridge.timerlog.commit_log import CommitLog
from delaybridge.timerlog.due_hint import DueHint
from delaybridge.timerlog.gc_pause import without_gc
from delaybridge.timerlog.quarantine import Quarantine
from delaybridge.timerlog.records import DeliveryCursor, DueRecord
from delaybridge.timerlog.timer_log import TimerLog
from delaybridge.wheel import TimingWheel

ROLL = read_pass.ROLL
ROLL_RETRY_MS = 1_000
log = logging.getLogger(__name__)
new_due = partial(tuple.__new__, DueRecord)
new_cursor = partial(tuple.__new__, DeliveryCursor)
WHOLE_TICK = (1 << 62) - 1
"""Ordinal meaning "this tick's list was read to its end"."""
WINDOW_ENTRIES = 1 << 16

RollWriter = Callable[[list[int], list[int], int], list[tuple[int, str]]]
"""write_rolls(indexes, commit-log positions, tick): copy forward; -> damaged (pos, why)."""


class Reader:
    """Hands out due messages in order and tracks what is done."""

    def __init__(
        self,
        timer: TimerLog,
        commit_log: CommitLog,
        wheel: TimingWheel,
        cancels: CancelBook,
        tick_ms: int,
        done: DeliveryCursor,
        write_rolls: RollWriter,
        quarantine: Quarantine,
    ) -> None:
        self.timer = timer
        self.commit_log = commit_log
        self.wheel = wheel
        self.cancels = cancels
        self.tick_ms = tick_ms
        self.done = done
        self.handed: DeliveryCursor | None = None
        self.inflight: deque[list[DueRecord]] = deque()
        """Batches handed out and not yet marked delivered, oldest first."""
        self.cancelled_skipped = 0
        self._write_rolls = write_rolls
        self.quarantine = quarantine
        # Resume point for the next window load: tick and entries of it already read.
        self._resume = (done.tick_ms, done.index + 1)
        self._w = read_window.empty_window(done.tick_ms - tick_ms)
        self._pos = 0
        self._due_hint = DueHint(wheel, tick_ms)
        self._roll_retry_ms = 0
        """While the clock is before it, a roll waits for disk space (take_due: [])."""

    @property
    def tick(self) -> int:
        """The tick being read: appends go after it."""
        if self._pos < len(self._w.idx):
            return int(self._w.tick_of[self._pos])
        return max(self._w.end_tick, self._resume[0])

    def _reload(self, limit_tick: int) -> bool:
        """Load the next window up to ``limit_tick``; False if nothing is due by then."""
        tick, skip = self._resume
        if self._w.end_tick >= tick:  # the old window was read to its end: move on
            tick, skip = self._w.end_tick + self.tick_ms, 0
        if tick > limit_tick:
            return False
        self._w = read_window.load(
            self.wheel, self.timer, self.commit_log, tick, skip, limit_tick, WINDOW_ENTRIES
        )
        self._pos = 0
        self._resume = (tick, skip)
        self._due_hint.read_through(self._w.end_tick)
        return len(self._w.idx) > 0

    def placed(self, min_slot_ms: int) -> None:
        """The store linked entries at ``min_slot_ms`` or later (after the read tick)."""
        w = self._w
        if min_slot_ms <= w.end_tick:
            # Keep the lists before that tick; the rest is collected again later.
            keep = int(np.searchsorted(w.ticks, min_slot_ms))
            self._w = w.cut(keep, min_slot_ms - self.tick_ms)
        self._due_hint.placed(min_slot_ms)

    # -- delivery -------------------------------------------------------------
    @without_gc
    def take_due(self, max_records: int, now_ms: int) -> list[DueRecord]:
        out: list[DueRecord] = []
        if now_ms < self._roll_retry_ms:
            return out  # a roll is waiting for disk space
        now_tick = now_ms // self.tick_ms * self.tick_ms
        applied = self.cancels.applied
        read_many = self.commit_log.read_many
        half_window = self.wheel.n_slots // 2 * self.tick_ms
        while len(out) < max_records:
            w, p = self._w, self._pos
            n = len(w.idx)
            if p >= n:
                limit = now_tick
                if self.inflight or out:  # keep room in the wheel for new messages
                    limit = min(limit, self.done.tick_ms + half_window)
                if not self._reload(limit):
                    break
                continue
            # One flat pass over the window: no per-tick work in Python. Records are
            # read in one batch per pass (read_many), after the entries are sorted out.
            stop = min(n, p + max_records - len(out))
            idx = w.idx[p:stop].tolist()
            ticks, ords = w.tick_of[p:stop].tolist(), w.ordinal[p:stop].tolist()
            kinds = w.kind[p:stop]
            tick_limit = self.done.tick_ms + half_window
            take: slice | list[int]
            skipped: list[int]
            rolls: read_pass.Rolls | None
            if (
                not (kinds == ROLL).any()
                and ticks[-1] <= tick_limit
                and (not applied or applied.keys().isdisjoint(idx))
            ):
                take = slice(p, stop)
                q = stop - p
                skipped = []
                rolls = None  # all deliverable
            else:
                busy = bool(out or self.inflight)
                take, q, skipped, rolls = read_pass.sort_out(
                    w.cl[p:stop], idx, ticks, ords, kinds, applied, tick_limit, busy
                )
            if isinstance(take, slice):
                cl, t_list, o_list = w.cl[take], ticks, ords
            else:
                cl = w.cl[p + np.asarray(take, dtype=np.int64)]
                t_list, o_list = [ticks[j] for j in take], [ords[j] for j in take]
            try:
                recs = read_many(cl)
            except IntegrityError:  # a damaged record: read them one by one
                recs, t_list, o_list = self.quarantine.read(cl, t_list, o_list)
            # map/zip/partial keep the per-record construction in C.
            cursors = map(new_cursor, zip(t_list, o_list, strict=True))
            before = len(out)
            out += map(new_due, zip(recs, cursors, strict=True))
            self._pos = p + q
            if rolls is not None:
                damaged = self._roll(w, p, rolls, now_ms)
                if damaged is None:
                    del out[before:]  # the pass is undone: read again once there is room
                    break
                if damaged:
                    out[before:] = sorted([*out[before:], *damaged], key=_cursor)
            for k in skipped:
                del applied[k]
            self.cancelled_skipped += len(skipped)
            if rolls is None and q < stop - p:
                break  # a roll or the half-window limit waits for in-flight messages
        if out:
            self.handed = out[-1].cursor
            self.inflight.append(out)
        elif not self.inflight:
            self.done = max(self.done, self._read_position())
        return out

    def _roll(
        self, w: read_window.Window, p: int, rolls: read_pass.Rolls, now_ms: int
    ) -> list[DueRecord] | None:
        """Copy rolled messages forward; returns the damaged ones quarantined instead.
        None, with the pass undone (window ``w`` at ``p``), if the disk has no room:
        retried after ``ROLL_RETRY_MS``."""
        done = self.done
        self.done = DeliveryCursor(rolls.tick_ms, rolls.last_ordinal)
        # Copies may land anywhere after the roll's tick, even on ticks the window
        # already covers: read on from the roll's tick after them.
        if w.end_tick > rolls.tick_ms:
            keep = int(np.searchsorted(w.ticks, rolls.tick_ms, side="right"))
            self._w = w.cut(keep, rolls.tick_ms)
        try:
            bad = self._write_rolls(rolls.indexes, rolls.cl_positions, rolls.tick_ms)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            self._w = w
            self._pos = p
            self.done = done
            self._roll_retry_ms = now_ms + ROLL_RETRY_MS
            log.warning(
                "%s: no room to roll %d messages forward (%s); delivery waits, retrying in %d ms",
                self.timer.log.directory.parent,
                len(rolls.indexes),
                exc,
                ROLL_RETRY_MS,
            )
            return None
        cursor = DeliveryCursor(rolls.tick_ms, rolls.last_ordinal)
        quarantined = (self.quarantine.damaged(pos, rolls.tick_ms, why) for pos, why in bad)
        return [DueRecord(rec, cursor) for rec in quarantined if rec is not None]

    def mark_delivered(self, cursor: DeliveryCursor) -> list[DueRecord]:
        """Everything handed out up to ``cursor`` was delivered; returns those records."""
        if self.handed is None or cursor > self.handed:
            raise ValueError(f"cursor {cursor} was never handed out (last: {self.handed})")
        done: list[DueRecord] = []
        inflight = self.inflight
        while inflight and inflight[0][-1].cursor <= cursor:
            done += inflight.popleft()
        if inflight and inflight[0][0].cursor <= cursor:
            batch = inflight[0]
            cut = next(j for j, d in enumerate(batch) if d.cursor > cursor)
            done += batch[:cut]
            inflight[0] = batch[cut:]
        if inflight:
            self.done = max(self.done, cursor)
        else:
            self.done = max(self.done, self._read_position())
        return done

    def _read_position(self) -> DeliveryCursor:
        """The cursor of the last entry read (delivered, skipped or rolled)."""
        w, p = self._w, self._pos
        if p >= len(w.idx) and w.end_tick >= self._resume[0]:
            return DeliveryCursor(w.end_tick, WHOLE_TICK)  # every tick <= end_tick is read
        if p == 0:
            tick, skip = self._resume
            return DeliveryCursor(tick, skip - 1)
        return DeliveryCursor(int(w.tick_of[p - 1]), int(w.ordinal[p - 1]))

    # -- questions -------------------------------------------------------------
    def next_due_ms(self, until_ms: int | None = None) -> int | None:
        """The first tick with entries not yet read; with ``until_ms``, None when there is
        none up to it (the read lag and the loop's wake-up look no further than that)."""
        due = self._next_due_ms(until_ms)
        return None if due is None else max(due, self._roll_retry_ms)

    def _next_due_ms(self, until_ms: int | None) -> int | None:
        if self._pos < len(self._w.idx):
            return self.tick
        if self._due_hint.known:  # before reading the wheel for the start
            return self._due_hint.hint
        tick, skip = self._resume
        start = max(self._w.end_tick + self.tick_ms, tick)
        if start == tick and skip:
            count = self.wheel.list_of(tick).length
            start = tick if count > skip else tick + self.tick_ms
        return self._due_hint.first_from(start, until_ms)

    def is_pending(self, index: int, slot_ms: int) -> bool:
        """Is the entry still ahead of the read position (not handed out or skipped)?"""
        w, p = self._w, self._pos
        if slot_ms > w.end_tick:
            tick, skip = self._resume
            if slot_ms == tick and skip and w.end_tick < tick:
                if skip >= self.wheel.list_of(tick).length:
                    return False  # read to its end: its list may start before live_start
                return index not in self._read_part(tick, skip)
            return True
        j = int(np.searchsorted(w.ticks, slot_ms))
        if j >= len(w.ticks) or int(w.ticks[j]) != slot_ms:
            return False  # a tick already read to its end
        a, b = max(int(w.starts[j]), p), int(w.starts[j + 1])
        return a < b and bool((w.idx[a:b] == index).any())

    def _read_part(self, tick: int, skip: int) -> set[int]:
        """Indexes of the first ``skip`` entries of ``tick`` (read before a restart)."""
        count = self.wheel.list_of(tick).length
        win = read_window.load(
            self.wheel, self.timer, self.commit_log, tick, 0, tick, max(count, 1)
        )
        return {int(i) for i in win.idx[:skip]}


def _cursor(due: DueRecord) -> DeliveryCursor:
    return due.cursor
