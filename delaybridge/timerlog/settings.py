"""Tuning of one store. Units are in every name; defaults are justified below.

Default wheel: 864,000 slots of 100 ms = a window of one day, a 27.6 MB file.
Why one day and not RocketMQ's two: the window bounds how long a written segment
can stay referenced (every pending entry is re-written at least once per window,
see docs/storage.md "roll"), so a shorter window means less disk held by delivered
messages; rolling a 365-day delay costs 365 small copies over a year, which is
nothing; and the wheel's mmap (touched pages count in RSS) stays under 30 MB.
"""

from __future__ import annotations

from dataclasses import dataclass

from delaybridge.errors import ConfigError

DAY_MS = 86_400_000


@dataclass(frozen=True)
class StoreSettings:
    """Settings of a :class:`~delaybridge.timerlog.TimerStore`.

    ``tick_ms`` and ``wheel_slots`` are part of the on-disk format: reopening a
    store with different values raises :class:`ConfigError` naming the setting.
    """

    tick_ms: int = 100
    """Wheel resolution; messages are delivered at most about one tick late."""
    wheel_slots: int = 864_000
    """Number of wheel slots; ``tick_ms * wheel_slots`` is the window (one day)."""
    max_delay_ms: int = 365 * DAY_MS
    """Largest accepted ``due_ms - now``; ``append`` raises above it."""
    commit_segment_bytes: int = 64 * 1024 * 1024
    """Size of one commit-log segment file (the unit of deletion)."""
    timer_segment_entries: int = 2 * 1024 * 1024
    """Entries per timer-log segment file (32 bytes each: 64 MiB)."""
    cancel_grace_ms: int = 60_000
    """How long a cancel that matched nothing waits for its message to arrive."""
    index_run_entries: int = 1 << 16
    """Timer-log entries per sorted run of the id index (a power of two, 16 to 65,536:
    rows are 16-bit). A lookup costs a binary search per run (~15 us); a smaller run
    means more runs, a larger one a costlier merge of the run still filling. Not part of
    the format: another value rebuilds the index on open."""

    @property
    def window_ms(self) -> int:
        """Span of time the wheel addresses without rolling."""
        return self.tick_ms * self.wheel_slots

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first setting that is out of range."""
        checks = (
            ("tick_ms", self.tick_ms >= 1),
            ("wheel_slots", self.wheel_slots >= 16),
            ("max_delay_ms", self.max_delay_ms >= 0),
            ("commit_segment_bytes", self.commit_segment_bytes >= 4096),
            ("timer_segment_entries", self.timer_segment_entries >= 64),
            ("cancel_grace_ms", self.cancel_grace_ms >= 0),
            (
                "index_run_entries",
                16 <= self.index_run_entries <= 1 << 16
                and self.index_run_entries & (self.index_run_entries - 1) == 0,
            ),
        )
        for name, ok in checks:
            if not ok:
                raise ConfigError(f"store setting {name}={getattr(self, name)!r} is out of range")
