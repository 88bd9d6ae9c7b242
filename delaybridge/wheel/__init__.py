"""The on-disk time wheel: fixed slots indexing the timer log by due tick.

Public names::

    TimingWheel(path, tick_ms, slots)     # the slot array in <store>/wheel (mmap)
    wheel.link(times, indexes) -> prevs   # add a batch of entries to their ticks
    wheel.list_of(time_ms) -> SlotList    # (length, first, last); EMPTY_LIST if none
    wheel.scan(from_ms, to_ms) -> Scan    # the non-empty ticks in a range

See :class:`~delaybridge.wheel.wheel.TimingWheel` for the algorithm and
docs/storage.md for the slot format, the roll and the recovery rules. The wheel sits
below ``delaybridge.timerlog`` (which builds on it, never the other way round) and on
top of :mod:`delaybridge.fileformat` (the file header and the vectorised CRC that
every store file shares).
"""

from delaybridge.wheel.wheel import EMPTY_LIST, Scan, SlotList, TimingWheel

__all__ = ["EMPTY_LIST", "Scan", "SlotList", "TimingWheel"]
