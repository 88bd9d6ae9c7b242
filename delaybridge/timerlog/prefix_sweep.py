"""Cancel by id prefix in a store: a paced sweep of the live timer log.

The id index (:mod:`id_index`) is hashed: it answers "which entries carry this id", never
"which ids start with this". A cancel by prefix (``delay-cancel-prefix``, the admin
API's bulk cancel) therefore walks the store's live timer log, in index order, in
steps of at most ``budget`` entries that the owner runs once per loop turn
(:meth:`IdMatcher.sweep`), so a sweep of ten million pending messages never holds a
delivery back for more than one step (docs/benchmarks.md, "Cancel by id prefix").

**A step.** The entries ``[next, next + budget)`` are read without their CRC; each one's
commit-log record is located and its id compared with the prefix straight from the
mapped segment, all rows at once in numpy (:func:`prefix_rows`: the type byte says the
layout, the layout says where ``id_len`` and the id are). Only the rows that pass are
looked at one by one: still pending (:meth:`Reader.is_pending`, not cancelled), their
CRC-checked record read, and the cancel's rule applied (:meth:`Cancel.applies_to`: the
prefix, the target topic if named, sent before the cancel).

**Why nothing slips through while a sweep runs.** Three things cover what a step has
not reached yet:

1. *delivery*: while a sweep or a waiting prefix cancel is active, the store screens
   every record it hands out (:meth:`IdMatcher.screen`): one the cancel applies to is
   cancelled there instead of delivered;
2. *appends*: a record stored after the sweep started lies at or after the sweep's
   start and is met by the sweep (it reads up to the log's end *now*, not at its
   start); one stored after the sweep ended meets the waiting cancel
   (:meth:`CancelBook.match`), for ``cancel_grace_ms``;
3. *rolls*: a copy made by a roll is appended to the timer log, so the sweep meets it.

A sweep is memory only. A restart (kill -9) before it ends loses it, but its waiting
cancel is in the cancel log and starts a new sweep when the store opens
(:meth:`IdMatcher.resume_sweeps`).

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from delaybridge.fileformat import HEADER_SIZE
from delaybridge.timerlog import commit_record, timer_entry
from delaybridge.timerlog.cancels import CancelBook
from delaybridge.timerlog.commit_log import CommitLog
from delaybridge.timerlog.reader import Reader
from delaybridge.timerlog.records import Cancel, TimerRecord
from delaybridge.timerlog.timer_log import TimerLog

Take = Callable[[TimerRecord, int, int], None]
"""take(record, timer-log index, tick): cancel a pending message (the matcher's)."""
Read = Callable[[int], TimerRecord | None]
"""read(commit-log position): the CRC-checked record, None if damaged."""

DEFAULT_BUDGET = 65_536
"""Timer-log entries a sweep examines per loop turn (docs/benchmarks.md)."""
STEP = DEFAULT_BUDGET
TAKE_PER_STEP = 1_024
"""Messages a sweep takes per loop turn at most, however dense the prefix."""
_TYPE_AT = commit_record.TYPE_AT
_COMPACT = int(commit_record.RecordType.COMPACT)
_WIDE = int(commit_record.RecordType.WIDE)
_COMPACT_ID_LEN_AT = _TYPE_AT + 2
"""A compact record's ``id_len`` (u8): after the type and flags bytes."""
_WIDE_ID_LEN_AT = _TYPE_AT + 2
"""A wide record's ``id_len`` (u16 LE): after the type and reserved bytes."""


@dataclass(slots=True)
class Sweep:
    """One prefix cancel walking a store's timer log."""

    cancel: Cancel
    next_index: int
    """The first timer-log entry not examined yet."""
    taken: int = 0
    """Messages it cancelled so far."""


@dataclass(slots=True)
class Count:
    """A count of what one prefix cancel would take, made a step at a time
    (:meth:`Sweeps.count_step`): the header path's check against the cap."""

    cancel: Cancel
    next_index: int
    """The first timer-log entry not examined yet."""
    limit: int | None
    """Stop once this many are found (the cap + 1); None: count all."""
    found: int = 0
    done: bool = False


class Sweeps:
    """The prefix cancels sweeping one store, and the counting of what one would take."""

    def __init__(
        self, timer: TimerLog, commit_log: CommitLog, reader: Reader, cancels: CancelBook
    ) -> None:
        self.timer = timer
        self.commit_log = commit_log
        self.reader = reader
        self.cancels = cancels
        self.running: list[Sweep] = []

    def start(self, cancel: Cancel, live_start: int) -> None:
        """Sweep the live timer log for ``cancel`` (a prefix cancel), from ``live_start``."""
        self.running.append(Sweep(cancel, live_start))

    def step(self, budget: int, live_start: int, read: Read, take: Take) -> int:
        """Examine up to ``budget`` entries, for the running sweeps in order, and take at
        most :data:`TAKE_PER_STEP` messages (each one a record read and a cancel-log
        record: a dense prefix would otherwise cost a step ~0.7 ms per 100 entries);
        returns how many messages were cancelled. A sweep that reaches the log's end is
        done."""
        taken = 0
        while self.running and budget > 0 and taken < TAKE_PER_STEP:
            sweep = self.running[0]
            start = max(sweep.next_index, live_start)
            stop = min(self.timer.end, start + budget)
            if start < stop:
                entries = self.timer.read(start, stop, False)
                got, examined = self._scan(
                    sweep.cancel, start, entries, read, take, TAKE_PER_STEP - taken
                )
                stop = start + examined
                sweep.taken += got
                taken += got
            budget -= stop - start
            sweep.next_index = stop
            if stop >= self.timer.end:
                self.running.pop(0)
        return taken

    def count_step(self, count: Count, budget: int, live_start: int, read: Read) -> int:
        """Advance ``count`` by up to ``budget`` entries; returns how many it examined.
        It is done at the log's end (as it is then) or at its limit."""
        start = max(count.next_index, live_start)
        stop = min(self.timer.end, start + budget)
        if start < stop:
            left = None if count.limit is None else count.limit - count.found
            entries = self.timer.read(start, stop, False)
            found, examined = self._scan(count.cancel, start, entries, read, None, left)
            count.found += found
            stop = start + examined
        count.next_index = stop
        count.done = stop >= self.timer.end or (
            count.limit is not None and count.found >= count.limit
        )
        return stop - start

    def count(self, cancel: Cancel, live_start: int, read: Read, cap: int | None) -> int:
        """How many pending messages ``cancel`` would take now, counting no further than
        ``cap + 1`` (None: all). A whole pass at once, on the caller's turn: for tools
        and tests; the sidecar counts a step per loop turn (:meth:`count_step`)."""
        found = 0
        limit = None if cap is None else cap + 1
        chunks = self.timer.chunks(live_start, self.timer.end, check=False, chunk_entries=STEP)
        for first, entries in chunks:  # a step's size: its temporaries stay in the caches
            left = None if limit is None else limit - found
            found += self._scan(cancel, first, entries, read, None, left)[0]
            if limit is not None and found >= limit:
                break
        return found

    def _scan(
        self,
        cancel: Cancel,
        first: int,
        entries: timer_entry.Entries,
        read: Read,
        take: Take | None,
        limit: int | None = None,
    ) -> tuple[int, int]:
        """The messages of ``entries`` (from index ``first``) ``cancel`` applies to, each
        taken with ``take`` unless None (then only counted), up to ``limit``; returns how
        many, and how many entries were examined (all, unless the limit stopped it)."""
        positions = timer_entry.positions_of(entries)
        rows = prefix_rows(self.commit_log, positions, cancel.id.encode())
        if not len(rows):
            return 0, len(entries)
        slots = entries["slot_ms"][rows].tolist()
        found = 0
        applied = self.cancels.applied
        for row, slot in zip(rows.tolist(), slots, strict=True):
            index = first + row
            if index in applied or not self.reader.is_pending(index, slot):
                continue
            rec = read(int(positions[row]))
            if rec is None or not cancel.applies_to(rec):
                continue
            found += 1
            if take is not None:
                take(rec, index, slot)
            if found == limit:
                return found, row + 1
        return found, len(entries)


def prefix_rows(
    commit_log: CommitLog, positions: npt.NDArray[np.int64], prefix: bytes
) -> npt.NDArray[np.intp]:
    """The rows of ``positions`` (commit-log positions) whose record's id starts with
    ``prefix``, read from the mapped segments without the CRC (callers confirm each row
    on its CRC-checked record). A position in no segment, or whose bytes are not a
    record's (a hole punched out of a finished part), is no row."""
    log = commit_log.log
    out: list[npt.NDArray[np.intp]] = []
    if not len(positions) or not log.segments:
        return np.empty(0, np.intp)
    bases = np.asarray(log._bases, dtype=np.int64)
    segs = np.searchsorted(bases, positions, side="right") - 1
    k = len(prefix)
    want = np.frombuffer(prefix, np.uint8)
    first, last = int(segs.min()), int(segs.max())
    for s in range(max(first, 0), last + 1):  # a chunk's entries lie in a few segments
        rows = np.flatnonzero(segs == s)
        if not len(rows):
            continue
        mm = log.segments[s].map()
        data = np.frombuffer(mm, np.uint8)
        try:
            out.append(rows[_matching(data, positions[rows] - bases[s] + HEADER_SIZE, want, k)])
        finally:
            del data  # no view of the map may outlive this call (it may be closed)
    return np.concatenate(out) if out else np.empty(0, np.intp)


def _matching(
    data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], want: npt.NDArray[np.uint8], k: int
) -> npt.NDArray[np.intp]:
    """Which of the records at ``starts`` in ``data`` have an id starting with ``want``.

    The rows still in the running are narrowed after every byte compared, so each later
    gather reads fewer of them (most ids differ in their first bytes): the cost is about
    two gathers per row, not ``k``."""
    last = len(data) - 1
    starts = np.minimum(starts, last - _WIDE_ID_LEN_AT - 1)  # a start past the map: no id
    kind = data[starts + _TYPE_AT]
    compact = kind == _COMPACT
    rows = np.flatnonzero(compact | (kind == _WIDE))
    compact = compact[rows]
    at = starts[rows]
    id_len = data[at + _COMPACT_ID_LEN_AT].astype(np.int64)
    wide = np.flatnonzero(~compact)
    if len(wide):  # a u16: its high byte too
        id_len[wide] |= data[at[wide] + _WIDE_ID_LEN_AT + 1].astype(np.int64) << 8
    id_at = at + np.where(compact, commit_record.COMPACT_SIZE, commit_record.WIDE_SIZE)
    keep = np.flatnonzero((id_len >= k) & (id_at + k <= last + 1))
    rows, id_at = rows[keep], id_at[keep]
    for j in range(k):
        keep = np.flatnonzero(data[id_at + j] == want[j])
        rows, id_at = rows[keep], id_at[keep]
        if not len(rows):
            break
    return rows
