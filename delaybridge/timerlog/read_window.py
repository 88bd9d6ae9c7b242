"""Collecting slot lists into a read window: many ticks' lists in a few numpy passes.

A slot's list is threaded backwards through the timer log (``prev`` pointers), so
reading it in arrival order means collecting it first. Doing that tick by tick in
Python costs microseconds per tick; instead the reader asks for a *window*: the
lists of every non-empty tick in a time range, up to ``cap`` entries, collected

* for short lists, all together: one vectorised step follows ``prev`` for every
  list at once, so the number of numpy passes is the longest list's length;
* for a long list, by a range scan when it is dense (the entries between its
  first and last are mostly its own: read them in bulk, keep those of its tick),
  or by following pointers one by one when it is sparse.

Lists holding ROLLED entries are re-ordered by source offset (see placement).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import timer_entry
from delaybridge.timerlog.commit_log import CommitLog
from delaybridge.timerlog.commit_record import source_offset_of
from delaybridge.timerlog.timer_log import CHUNK_ENTRIES, TimerLog
from delaybridge.wheel import TimingWheel

I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]
SHORT_LIST = 64
DENSE_FACTOR = 4


@dataclass
class Window:
    """Entries of consecutive non-empty ticks, in delivery order."""

    idx: I64
    cl: I64
    kind: I8
    ticks: I64
    """Tick of each list, ascending."""
    starts: I64
    """Start of each list in the flat arrays; ``starts[-1] == len(idx)``."""
    first_ordinal: int
    """Ordinal (within its tick) of the window's first entry; later lists start at 0."""
    end_tick: int
    """Every tick up to here is either empty or in the window."""
    tick_of: I64
    """Tick of every entry (for cursors)."""
    ordinal: I64
    """Ordinal of every entry within its tick's list (for cursors)."""

    def cut(self, keep_lists: int, end_tick: int) -> Window:
        """The first ``keep_lists`` lists only, now covering ticks up to ``end_tick``."""
        n = int(self.starts[keep_lists])
        return Window(
            self.idx[:n],
            self.cl[:n],
            self.kind[:n],
            self.ticks[:keep_lists],
            self.starts[: keep_lists + 1],
            self.first_ordinal,
            end_tick,
            self.tick_of[:n],
            self.ordinal[:n],
        )


def empty_window(end_tick: int) -> Window:
    e = np.empty(0, dtype=np.int64)
    return Window(
        e, e, np.empty(0, dtype=np.int8), e, np.zeros(1, dtype=np.int64), 0, end_tick, e, e
    )


def load(
    wheel: TimingWheel,
    timer: TimerLog,
    commit_log: CommitLog,
    from_tick: int,
    skip: int,
    to_tick: int,
    cap: int,
) -> Window:
    """The window starting at ``from_tick`` (its first ``skip`` entries excluded)."""
    tick_ms = wheel.tick_ms
    # Nothing pending lies a whole window ahead of the read position: if the
    # window's worth of slots is empty, so is everything up to ``to_tick``.
    asked_to = to_tick
    to_tick = min(to_tick, from_tick + tick_ms * (wheel.n_slots - 1))
    times, counts, firsts, lasts = [], [], [], []
    total, t, end_tick = 0, from_tick, to_tick
    while t <= to_tick and total < cap:
        tm, cn, fi, la, scanned_to = wheel.scan(t, to_tick)  # a Scan, unpacked
        if len(tm) and tm[0] == from_tick and skip and cn[0] <= skip:
            tm, cn, fi, la = tm[1:], cn[1:], fi[1:], la[1:]
        csum = np.cumsum(cn) + total
        over = np.flatnonzero(csum >= cap)
        if len(over):  # stop at the list that fills the window
            k = int(over[0]) + 1
            tm, cn, fi, la = tm[:k], cn[:k], fi[:k], la[:k]
            end_tick = int(tm[-1])
        times.append(tm)
        counts.append(cn)
        firsts.append(fi)
        lasts.append(la)
        total = int(csum[len(tm) - 1]) if len(tm) else total
        t = scanned_to + tick_ms
    if not times or total == 0:
        return empty_window(asked_to if end_tick == to_tick else end_tick)
    ticks = np.concatenate(times)
    cnt = np.concatenate(counts)
    first = np.concatenate(firsts)
    last = np.concatenate(lasts)
    idx, cl, kind = _collect(timer, first, last, cnt, ticks)
    starts = np.zeros(len(ticks) + 1, dtype=np.int64)
    np.cumsum(cnt, out=starts[1:])
    if (kind == timer_entry.EntryType.ROLLED).any():
        _order_rolled(commit_log, idx, cl, kind, starts)
    tick_of = np.repeat(ticks, cnt)
    ordinal = np.arange(len(idx), dtype=np.int64) - np.repeat(starts[:-1], cnt)
    first_ordinal = skip if ticks[0] == from_tick else 0
    if first_ordinal:
        idx, cl, kind = idx[first_ordinal:], cl[first_ordinal:], kind[first_ordinal:]
        tick_of, ordinal = tick_of[first_ordinal:], ordinal[first_ordinal:]
        starts = starts - first_ordinal
        starts[0] = 0
    return Window(idx, cl, kind, ticks, starts, first_ordinal, end_tick, tick_of, ordinal)


def _collect(timer: TimerLog, first: I64, last: I64, cnt: I64, ticks: I64) -> tuple[I64, I64, I8]:
    long_lists = np.flatnonzero(cnt > SHORT_LIST)
    if not len(long_lists):
        return _chase_many(timer, last, cnt)
    parts: list[tuple[I64, I64, I8]] = []
    short = np.flatnonzero(cnt <= SHORT_LIST)
    small = _chase_many(timer, last[short], cnt[short])
    small_starts = np.concatenate(([0], np.cumsum(cnt[short])))
    where_short = {int(j): n for n, j in enumerate(short)}
    for j in range(len(cnt)):
        if j in where_short:
            n = where_short[j]
            a, b = small_starts[n], small_starts[n + 1]
            parts.append((small[0][a:b], small[1][a:b], small[2][a:b]))
        else:
            parts.append(_long_list(timer, int(first[j]), int(last[j]), int(cnt[j]), int(ticks[j])))
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
    )


def _chase_many(timer: TimerLog, last: I64, cnt: I64) -> tuple[I64, I64, I8]:
    """Follow ``prev`` for every list at once, filling each list from its end."""
    total = int(cnt.sum())
    idx = np.empty(total, dtype=np.int64)
    cl = np.empty(total, dtype=np.int64)
    kind = np.empty(total, dtype=np.int8)
    fill = np.cumsum(cnt) - 1
    cur = last.astype(np.int64).copy()
    left = cnt.copy()
    active = np.arange(len(cnt))
    while len(active):
        at = cur[active]
        entries = timer.gather(at)
        f = fill[active]
        idx[f] = at
        word = entries["cl_word"]
        cl[f] = (word & np.uint64(timer_entry.POS_MASK)).astype(np.int64)
        kind[f] = (word >> np.uint64(timer_entry.TYPE_SHIFT)).astype(np.int8)
        cur[active] = entries["prev"]
        left[active] -= 1
        fill[active] -= 1
        active = active[left[active] > 0]
        if len(active) and int(cur[active].min()) < 0:
            raise IntegrityError(f"{timer.log.directory}: a slot list ends before its count")
    return idx, cl, kind


def _long_list(
    timer: TimerLog, first: int, last: int, count: int, tick: int
) -> tuple[I64, I64, I8]:
    if last - first + 1 <= DENSE_FACTOR * count:
        parts = []
        for a, entries in timer.chunks(first, last + 1):
            rows = np.flatnonzero(entries["slot_ms"] == tick)
            word = entries["cl_word"][rows]
            parts.append(
                (
                    rows + a,
                    (word & np.uint64(timer_entry.POS_MASK)).astype(np.int64),
                    (word >> np.uint64(timer_entry.TYPE_SHIFT)).astype(np.int8),
                )
            )
            del entries
        idx = np.concatenate([p[0] for p in parts]).astype(np.int64)
        if len(idx) != count or idx[-1] != last:
            raise IntegrityError(
                f"{timer.log.directory}: tick {tick} holds {len(idx)} entries "
                f"between {first} and {last}, its slot says {count}"
            )
        return idx, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])
    a_idx, a_cl, a_kind = timer.chase(last, count)
    return (
        np.frombuffer(a_idx, np.int64).copy(),
        np.frombuffer(a_cl, np.int64).copy(),
        np.frombuffer(a_kind, np.int8).copy(),
    )


def _order_rolled(commit_log: CommitLog, idx: I64, cl: I64, kind: I8, starts: I64) -> None:
    """Sort, in place, each list holding a ROLLED entry by (source offset, index)."""
    rolled = kind == timer_entry.EntryType.ROLLED
    lists = np.unique(np.searchsorted(starts, np.flatnonzero(rolled), side="right") - 1)
    for j in lists:
        a, b = int(starts[j]), int(starts[j + 1])
        offsets = np.fromiter(
            (_source_offset(commit_log, int(p)) for p in cl[a:b]), np.int64, b - a
        )
        order = np.lexsort((idx[a:b], offsets)) + a
        idx[a:b], cl[a:b], kind[a:b] = idx[order], cl[order], kind[order]


def _source_offset(commit_log: CommitLog, cl_pos: int) -> int:
    seg, off = commit_log.log.locate(cl_pos)
    return source_offset_of(seg.map(), off)


assert CHUNK_ENTRIES > SHORT_LIST
