"""The write path of a store: place messages in the wheel, link and write their entries.

Used for appends and for roll copies. Every step works on the whole batch: numpy
placement (:mod:`placement`), numpy linking (:meth:`TimingWheel.plan_link`), one
``pwrite`` for the commit-log records and one for the timer-log entries.

A batch is written all or nothing (:meth:`Writer.write`), in this order:

0. place the batch and link it by a wheel *plan* that changes nothing yet, reserving
   the wheel pages the plan will write (a full disk fails here, nothing written);
1. the commit-log records (a failure moves nothing);
2. the timer-log entries; if they cannot be written, the commit log is cut back to
   where it ended (step 1 undone);
3. only then the wheel's slots (mapped and reserved at step 0: this cannot fail).

So a disk that fills mid-batch leaves the store exactly as before the batch, and a
later flush never writes a checkpoint past the last entry it can account for.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import timer_entry
from delaybridge.timerlog.commit_log import CommitLog
from delaybridge.timerlog.commit_record import due_of
from delaybridge.timerlog.placement import place
from delaybridge.timerlog.reader import Reader
from delaybridge.timerlog.settings import StoreSettings
from delaybridge.timerlog.timer_entry import EntryType
from delaybridge.timerlog.timer_log import TimerLog
from delaybridge.wheel import TimingWheel

I64 = npt.NDArray[np.int64]


class Written(NamedTuple):
    """Where a batch went: its first timer-log index, each entry's tick and record."""

    first: int
    slot: I64
    cl_pos: I64


class Writer:
    """Places, links and writes batches; the reader tells it where reading is."""

    def __init__(
        self,
        commit_log: CommitLog,
        timer: TimerLog,
        wheel: TimingWheel,
        settings: StoreSettings,
    ) -> None:
        self.commit_log = commit_log
        self.timer = timer
        self.wheel = wheel
        self.settings = settings
        self.reader: Reader | None = None

    def place(self, due: I64, floor_tick_ms: int, kind: EntryType) -> tuple[I64, I64]:
        """(slot time, entry type) of each due time, given the reader's position."""
        assert self.reader is not None
        slot, kinds = place(
            due,
            read_tick_ms=self.reader.tick,
            floor_tick_ms=floor_tick_ms,
            tick_ms=self.settings.tick_ms,
            window_ms=self.settings.window_ms,
            kind=kind,
        )
        return slot, kinds.astype(np.int64)

    def write(
        self,
        parts: Sequence[bytes | memoryview],
        sizes: Sequence[int],
        due: I64,
        hashes: npt.NDArray[np.uint32],
        floor_tick_ms: int,
        kind: EntryType,
    ) -> Written:
        """Write a batch of encoded records and their entries, all or nothing (the
        module docstring's steps); OSError (a full disk) leaves the store unchanged."""
        assert self.reader is not None
        slot, kinds = self.place(due, floor_tick_ms, kind)  # 0
        first = self.timer.end
        plan = self.wheel.plan_link(slot, np.arange(first, first + len(slot), dtype=np.int64))
        cl_end = self.commit_log.end
        cl_pos = self.commit_log.append_encoded(parts, sizes)  # 1
        entries = timer_entry.build(
            hashes, plan.prev, slot, cl_pos, kinds.astype(np.uint64), crc=False
        )
        try:
            self.timer.append(entries)  # 2
        except BaseException:
            self.commit_log.log.truncate(cl_end)
            raise
        self.wheel.apply_link(plan)  # 3
        self.reader.placed(int(slot.min()))
        return Written(first, slot, cl_pos)

    def copy_forward(
        self, indexes: list[int], cl_positions: list[int], floor_tick_ms: int
    ) -> tuple[int, list[tuple[int, str]]]:
        """Roll: copy the records verbatim to the log's end and place them again.

        Returns how many were copied, and (position, what is wrong) of each record that
        failed its check: not copied, the caller quarantines it.
        """
        raws: list[bytes] = []
        kept: list[int] = []
        damaged: list[tuple[int, str]] = []
        for k, pos in zip(indexes, cl_positions, strict=True):
            try:
                raws.append(self.commit_log.raw(pos))
                kept.append(k)
            except IntegrityError as exc:
                damaged.append((pos, str(exc)))
        if not raws:
            return 0, damaged
        due = np.fromiter(
            (due_of(r) for r in raws),
            np.int64,
            len(raws),
        )
        hashes = np.fromiter((self.timer.entry(k).id_hash for k in kept), np.uint32, len(kept))
        self.write(raws, [len(r) for r in raws], due, hashes, floor_tick_ms, EntryType.ROLLED)
        return len(raws), damaged
