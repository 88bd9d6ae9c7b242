"""The write path of a store: place messages in the wheel, link and write their entries.

Used for appends and for roll copies. Every step works on the whole batch: numpy
placement (:mod:`placement`), numpy linking (:meth:`TimingWheel.link`), one
``pwrite`` for the commit-log records and one for the timer-log entries.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from delaybridge.timerlog import timer_codec
from delaybridge.timerlog.commit_log import DUE_OFFSET, CommitLog
from delaybridge.timerlog.placement import place
from delaybridge.timerlog.reader import Reader
from delaybridge.timerlog.settings import StoreSettings
from delaybridge.timerlog.timer_codec import EntryType
from delaybridge.timerlog.timer_log import TimerLog
from delaybridge.wheel import TimingWheel

I64 = npt.NDArray[np.int64]


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

    def link_and_write(
        self, slot: I64, kinds: I64, hashes: npt.NDArray[np.uint32], cl_pos: I64
    ) -> int:
        """Link entries to their slots and write them; returns the first one's index."""
        assert self.reader is not None
        first = self.timer.end
        indexes = np.arange(first, first + len(slot), dtype=np.int64)
        prev = self.wheel.link(slot, indexes)
        entries = timer_codec.build(hashes, prev, slot, cl_pos, kinds.astype(np.uint64))
        self.timer.append(entries)
        self.reader.placed(int(slot.min()))
        return first

    def copy_forward(self, indexes: list[int], cl_positions: list[int], floor_tick_ms: int) -> int:
        """Roll: copy the records verbatim to the log's end and place them again."""
        raws = [self.commit_log.raw(p) for p in cl_positions]
        due = np.fromiter(
            (int.from_bytes(r[DUE_OFFSET : DUE_OFFSET + 8], "little", signed=True) for r in raws),
            np.int64,
            len(raws),
        )
        hashes = np.fromiter(
            (self.timer.entry(k).id_hash for k in indexes), np.uint32, len(indexes)
        )
        cl_pos = self.commit_log.append_encoded(raws, [len(r) for r in raws])
        slot, kinds = self.place(due, floor_tick_ms, EntryType.ROLLED)
        self.link_and_write(slot, kinds, hashes, cl_pos)
        return len(raws)
