"""The on-disk time wheel: fixed slots indexing the timer log by due tick.

See :class:`~delaybridge.wheel.wheel.TimingWheel` for the algorithm and
docs/storage.md for the slot format, the roll and the recovery rules. The file
header codec (:mod:`file_header`) and the vectorised CRC (:mod:`fixedcrc`) live here
too: the wheel is the lowest layer of the store, and ``delaybridge.timerlog`` builds
on it (never the other way round).
"""

from delaybridge.wheel.wheel import TimingWheel

__all__ = ["TimingWheel"]
