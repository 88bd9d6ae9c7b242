"""The store's notion of "now", injected so tests control time.

The store never reads the system clock directly: it asks its :class:`Clock`. The
service passes :data:`SYSTEM_CLOCK`; tests pass a :class:`ManualClock` and advance it,
so every timing rule (never early, roll, grace periods) is tested deterministically.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of epoch milliseconds."""

    def now_ms(self) -> int:
        """The current time, epoch milliseconds."""
        ...


class SystemClock:
    """Wall-clock time (``time.time_ns`` truncated to milliseconds)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


SYSTEM_CLOCK: Clock = SystemClock()


class ManualClock:
    """A clock that moves only when told to; for tests and benchmarks."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, delta_ms: int) -> None:
        """Move time forward by ``delta_ms`` (never backwards)."""
        if delta_ms < 0:
            raise ValueError(f"a clock cannot go back: delta_ms={delta_ms}")
        self._now_ms += delta_ms

    def set(self, now_ms: int) -> None:
        """Jump to ``now_ms`` (must not be earlier than the current time)."""
        self.advance(now_ms - self._now_ms)
