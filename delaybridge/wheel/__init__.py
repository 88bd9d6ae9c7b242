"""The on-disk time wheel: fixed slots indexing the timer log by due tick.

See :class:`~delaybridge.wheel.wheel.TimingWheel` for the algorithm and
docs/storage.md for the slot format, the roll and the recovery rules.
"""

from delaybridge.wheel.wheel import TimingWheel

__all__ = ["TimingWheel"]
