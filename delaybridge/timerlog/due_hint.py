"""The first wheel tick with unread entries ahead of the read position, cached.

The loop asks for it on every turn (when to wake) and the read lag gauge at every
checkpoint, for every store; scanning the one-day wheel each time cost a fifth of the
sidecar. The answer is kept until the reader reads past it; appends lower it
(:meth:`placed`). A question bounded by a horizon (``until_ms``: now, or the next tick)
scans no further, and remembers how far the wheel is known empty, so a caught-up store
looks only at the ticks added since it last asked.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

from delaybridge.wheel import TimingWheel


class DueHint:
    def __init__(self, wheel: TimingWheel, tick_ms: int) -> None:
        self.wheel = wheel
        self.tick_ms = tick_ms
        self._hint: int | None = None
        self._valid = False
        self._empty_through: int | None = None
        """Every tick from the read position up to this one is known empty."""

    def placed(self, min_slot_ms: int) -> None:
        """Entries were linked at ``min_slot_ms`` or later."""
        if self._valid and (self._hint is None or min_slot_ms < self._hint):
            self._hint = min_slot_ms
        if self._empty_through is not None and min_slot_ms <= self._empty_through:
            self._empty_through = min_slot_ms - self.tick_ms

    def read_through(self, end_tick: int) -> None:
        """The reader loaded every tick up to ``end_tick``: a hint there is used up."""
        if self._valid and self._hint is not None and self._hint <= end_tick:
            self._valid = False

    @property
    def known(self) -> bool:
        """Is the answer cached (:attr:`hint`)? Then the start need not be worked out."""
        return self._valid

    @property
    def hint(self) -> int | None:
        return self._hint

    def first_from(self, start: int, until_ms: int | None) -> int | None:
        """The first non-empty tick at or after ``start`` (up to ``until_ms`` if given)."""
        if self._valid:
            return self._hint
        if until_ms is not None and until_ms < start + self.tick_ms * (self.wheel.n_slots - 1):
            return self._first_until(start, until_ms)
        self._hint = self._first_in_window(start)
        self._valid = True
        return self._hint

    def _first_until(self, start: int, until_ms: int) -> int | None:
        t = start
        if self._empty_through is not None and self._empty_through >= start:
            t = self._empty_through + self.tick_ms
        while t <= until_ms:
            found = self.wheel.scan(t, until_ms)
            if len(found.times):
                self._hint = int(found.times[0])
                self._valid = True
                return self._hint
            self._empty_through = found.scanned_to
            t = found.scanned_to + self.tick_ms
        return None

    def _first_in_window(self, start: int) -> int | None:
        """Scanning near ticks first, the whole wheel's window from ``start``."""
        end = start + self.tick_ms * (self.wheel.n_slots - 1)
        t = start
        while t <= end:
            found = self.wheel.scan(t, end)
            if len(found.times):
                return int(found.times[0])
            t = found.scanned_to + self.tick_ms
        return None
