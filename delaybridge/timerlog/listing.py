"""Paged listing of a store's pending messages, walking the wheel from a cursor.

A page never scans the store. It walks wheel ticks from the cursor's tick forward
(:func:`read_window.load` collects the slot lists of the next non-empty ticks in a few numpy
passes), looks at each entry in ``(tick, index)`` order and stops when the page is
full, or when it has examined ``budget`` entries -- then it returns a *partial* page
and the position it reached, so a selective filter costs bounded work per call and the
caller continues with the cursor. Work per page: the entries between two cursors,
at most ``budget`` (plus the rest of one slot list), whatever the store holds.

Where pending messages sit (see :mod:`placement`, :mod:`reader`):

1. **Window part.** A message due within the wheel's window is a MESSAGE (or ROLLED:
   a copy made by a roll) entry at its due tick. Walking ticks from the read position
   lists them in due order. One already overdue when stored sits at the tick after the
   read position then (at most one tick after the read position now), so a due range
   ``[due_from_ms, due_to_ms)`` walks ticks ``ceil(due_from)`` to
   ``max(ceil(due_to - 1), read tick + tick)`` and compares each record's due time.
2. **Rolled part.** A message due beyond the window is a ROLL entry at the tick where it
   re-enters the window (about one window before it is due, or the window's far edge
   for longer delays); reaching it copies the message forward. These are listed after
   the window part, by the tick of their ROLL entry: due order for delays up to two
   windows, only roughly beyond. A ROLL entry's tick is always before its due time, so
   ``due_to_ms`` bounds this walk too.

An entry is pending if it is neither cancelled (the cancel book's ``applied``) nor read
yet (:meth:`Reader.is_pending`): in-flight messages (handed out, not yet marked
delivered) are not listed. Each pending message has exactly one such entry, so a walk
lists each once. Between pages the store changes: appends ahead of the cursor are
listed, behind it not; delivered and cancelled messages vanish. A roll during the walk
moves a message: into the window part (listed there if the walk is still in it, else
not: it was listed as rolled or is, at worst, missed if delivery overtook the walk's
cursor), or forward in the rolled part -- entries made after the walk entered the
rolled part (index >= ``roll_bound``) are skipped there, so nothing is listed twice.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from delaybridge.errors import IntegrityError
from delaybridge.fileformat import HEADER_SIZE
from delaybridge.timerlog import commit_record, read_window
from delaybridge.timerlog.list_cursor import END, Part, Position
from delaybridge.timerlog.records import TimerRecord
from delaybridge.timerlog.store import TimerStore
from delaybridge.timerlog.timer_entry import EntryType

ROLL = int(EntryType.ROLL)
LOAD_ENTRIES = 4096
"""Most entries collected per window load (the first load collects about a page)."""
DEFAULT_BUDGET = 5_000
"""Entries a page may examine before it returns partial (~7 us each with a filter that
reads the record: a partial page costs ~35 ms, see docs/benchmarks.md)."""
_WIDE = commit_record.WIDE
_COMPACT = commit_record.COMPACT
_BODY = commit_record.PREFIX.size


@dataclass(frozen=True)
class Filter:
    """Which pending messages to list; None: any."""

    topic: str | None = None
    due_from_ms: int | None = None
    """Inclusive."""
    due_to_ms: int | None = None
    """Exclusive."""
    id_prefix: str | None = None

    def key(self) -> tuple[object, ...]:
        return (self.topic, self.due_from_ms, self.due_to_ms, self.id_prefix)


class Listed(NamedTuple):
    position: Position
    record: TimerRecord


@dataclass
class StorePage:
    items: list[Listed] = field(default_factory=list)
    next: Position = END
    """Everything up to here was examined (:data:`END`: the store is done)."""
    roll_bound: int | None = None
    """The rolled part's bound, set once the walk entered it: pass it back."""
    examined: int = 0
    damaged: int = 0
    """Pending records skipped because they failed their check (quarantined when due)."""

    @property
    def partial(self) -> bool:
        """Stopped by the budget, not by a full page or the end."""
        return self.next != END and (not self.items or self.items[-1].position != self.next)


def list_pending(
    store: TimerStore,
    name: str,
    after: Position,
    flt: Filter,
    limit: int,
    *,
    budget: int = DEFAULT_BUDGET,
    roll_bound: int | None = None,
) -> StorePage:
    """Up to ``limit`` pending messages of ``store`` (called ``name`` in positions) after
    ``after``, in listing order, examining at most about ``budget`` entries."""
    walk = _Walk(store, name, flt, limit, budget)
    page = walk.page
    if after.part >= Part.END:
        return page
    tick = store.settings.tick_ms
    read_tick = store.reader.tick
    edge = read_tick + tick * (store.wheel.n_slots - 1)
    if after.part == Part.WINDOW:
        lo = max(after.tick_ms, read_tick)
        hi = edge
        if flt.due_from_ms is not None:
            lo = max(lo, _ceil(flt.due_from_ms, tick))
        if flt.due_to_ms is not None:
            hi = min(hi, max(_ceil(flt.due_to_ms - 1, tick), read_tick + tick))
        if walk.run(Part.WINDOW, lo, hi, after, None):
            return page
        after = Position.before_tick(Part.ROLLED, read_tick)
    page.roll_bound = store.timer.end if roll_bound is None else roll_bound
    hi = edge if flt.due_to_ms is None else min(edge, flt.due_to_ms - 1)
    if not walk.run(Part.ROLLED, max(after.tick_ms, read_tick), hi, after, page.roll_bound):
        page.next = END
    return page


def _ceil(ms: int, tick: int) -> int:
    return -(-ms // tick) * tick


class _Walk:
    def __init__(self, store: TimerStore, name: str, flt: Filter, limit: int, budget: int):
        self.store = store
        self.name = name
        self.limit = limit
        self.budget = max(1, budget)
        self.page = StorePage()
        self.topic = None if flt.topic is None else flt.topic.encode()
        self.prefix = None if flt.id_prefix is None else flt.id_prefix.encode()
        self.due_from = flt.due_from_ms
        self.due_to = flt.due_to_ms

    def run(self, part: Part, lo: int, hi: int, after: Position, bound: int | None) -> bool:
        """Walk ticks ``lo..hi`` of ``part``; True if the page stopped (full or budget)."""
        store, page = self.store, self.page
        tick_ms = store.settings.tick_ms
        applied = store.cancels.applied
        t = lo
        grow = 2 * self.limit + 64  # a full page usually needs one small load
        while t <= hi:
            left = self.budget - page.examined
            if left <= 0:
                page.next = Position.end_of_tick(part, t - tick_ms)
                return True
            win = read_window.load(
                store.wheel, store.timer, store.commit_log, t, 0, hi, min(grow, left)
            )
            grow = min(2 * grow, LOAD_ENTRIES)
            order = np.lexsort((win.idx, win.tick_of))
            idx, cl, kind, ticks = (
                win.idx[order],
                win.cl[order],
                win.kind[order],
                win.tick_of[order],
            )
            if after.part == part and t <= after.tick_ms:  # the cursor's own tick
                at = ticks == after.tick_ms
                if self.name < after.store:
                    keep = ~at
                elif self.name == after.store:
                    keep = ~at | (idx > after.index)
                else:
                    keep = np.ones(len(idx), dtype=bool)
                idx, cl, kind, ticks = idx[keep], cl[keep], kind[keep], ticks[keep]
            cut = len(idx) > left
            if cut:
                idx, cl, kind, ticks = idx[:left], cl[:left], kind[:left], ticks[:left]
            want = kind == ROLL if part == Part.ROLLED else kind != ROLL
            if bound is not None:
                want &= idx < bound
            if applied:
                want &= ~np.isin(idx, np.fromiter(applied, np.int64, len(applied)))
            for j in self._matching(np.flatnonzero(want), cl):
                if self._take(part, int(idx[j]), int(cl[j]), int(ticks[j])):
                    page.examined += j + 1
                    page.next = page.items[-1].position
                    return True
            page.examined += len(idx)
            if cut:
                page.next = Position(int(part), int(ticks[-1]), self.name, int(idx[-1]))
                return True
            t = win.end_tick + tick_ms
        return False

    def _take(self, part: Part, index: int, cl_pos: int, tick: int) -> bool:
        """List the entry if it is pending; True once the page is full."""
        store = self.store
        if not store.reader.is_pending(index, tick):
            return False
        try:
            rec = store.commit_log.read(cl_pos)
        except IntegrityError:
            self.page.damaged += 1
            return False
        self.page.items.append(Listed(Position(int(part), tick, self.name, index), rec))
        return len(self.page.items) >= self.limit

    def _matching(self, rows: npt.NDArray[np.intp], cl: npt.NDArray[np.int64]) -> list[int]:
        """Those of ``rows`` whose record (at ``cl[row]``) passes the filters, read from its
        fixed fields without the CRC (checked once it matches): one pass per window, the
        segment of every record found at once. A record too damaged to read its fields
        is kept, for that check to judge."""
        if self.topic is None and self.prefix is None and self.due_from is self.due_to is None:
            return list(rows.tolist())
        log = self.store.commit_log.log
        pos = cl[rows]
        bases = np.asarray(log._bases, dtype=np.int64)
        segs = (np.searchsorted(bases, pos, side="right") - 1).tolist()
        offsets = (pos - bases[segs] + HEADER_SIZE + _BODY).tolist()
        maps = [s.map() for s in log.segments]
        unpack = _WIDE.unpack_from
        fixed = commit_record.WIDE_SIZE - _BODY
        unpack_compact = _COMPACT.unpack_from
        short = int(commit_record.RecordType.COMPACT)
        topic = self.topic
        prefix = self.prefix
        lo = -(1 << 63) if self.due_from is None else self.due_from
        hi = (1 << 63) if self.due_to is None else self.due_to
        out = []
        for row, s, off in zip(rows.tolist(), segs, offsets, strict=True):
            mm = maps[s]
            try:
                if mm[off] == short:  # the compact layout
                    _, _, id_len, topic_len, _, _, _, _, due, _ = unpack_compact(mm, off)
                    o = off + _COMPACT.size
                else:
                    _, id_len, topic_len, _, due, *_ = unpack(mm, off)
                    o = off + fixed
            except (struct.error, IndexError):
                out.append(row)
                continue
            if not lo <= due < hi:
                continue
            if prefix is not None and not mm[o : o + id_len].startswith(prefix):
                continue
            o += id_len
            if topic is None or mm[o : o + topic_len] == topic:
                out.append(row)
        return out
