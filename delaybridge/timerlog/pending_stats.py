"""Due-time histogram of a store's pending messages, read off the wheel's slot counts.

Every wheel slot holds the entry count of its tick, so a histogram of what is pending
by tick needs no look at the logs: one vectorised pass over the slot array (864,000
slots of 32 bytes for the default one-day window, ~27 MB mapped, some milliseconds;
its cost does not depend on how many messages are pending -- the same at 10 or 10M).

What the counts mean: each pending message has exactly one unread entry, at its due
tick if it is due within the window. A message due beyond the window is counted at the
tick where its ROLL entry sits, where it re-enters the window (about one window before
it is due): the wheel cannot tell those entries apart without reading them all, so the
histogram is exact only when nothing is due beyond the window (the per-topic totals are
always exact). Cancelled entries not yet passed are subtracted (the cancel book knows their
ticks); the list being read counts whole, so up to one tick's worth of messages just
handed out may still be counted.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from delaybridge.timerlog.store import TimerStore

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
CHUNK_SLOTS = 1 << 18


@dataclass
class Histogram:
    """Pending entries by due time, relative to ``start_ms``."""

    start_ms: int
    by_minute: list[int]
    """60 counts: ``[start + m min, start + (m+1) min)``; overdue ones in minute 0."""
    by_hour: list[int]
    """Counts per hour from ``start_ms`` to the wheel's edge (hour 0 = the minutes' sum)."""
    edge_ms: int
    """The wheel covers ticks before this; later due times are rolled (see module doc)."""

    def add(self, other: Histogram) -> None:
        """Sum ``other`` (same ``start_ms``) into this one; lists grow to the longer."""
        for mine, theirs in ((self.by_minute, other.by_minute), (self.by_hour, other.by_hour)):
            mine.extend([0] * (len(theirs) - len(mine)))
            for j, n in enumerate(theirs):
                mine[j] += n
        self.edge_ms = max(self.edge_ms, other.edge_ms)


def histogram(store: TimerStore, now_ms: int) -> Histogram:
    """The histogram of ``store`` (see the module docstring for what it counts)."""
    wheel = store.wheel
    read_tick = store.reader.tick
    edge = read_tick + store.settings.window_ms
    hours = -(-(edge - now_ms) // HOUR_MS) if edge > now_ms else 1
    by_minute = np.zeros(60, dtype=np.int64)
    by_hour = np.zeros(max(hours, 1), dtype=np.int64)
    for _, part in wheel.passes(CHUNK_SLOTS):  # slots on pages never used are empty
        times = part["time_ms"]
        live = (part["count"] != 0) & (times >= read_tick) & (times < edge)
        _bin(times[live], part["count"][live].astype(np.int64), now_ms, by_minute, by_hour)
    gone = [t for t in store.cancels.applied.values() if read_tick <= t < edge]
    if gone:
        times = np.array(gone, dtype=np.int64)
        _bin(times, -np.ones(len(gone), dtype=np.int64), now_ms, by_minute, by_hour)
    np.maximum(by_minute, 0, out=by_minute)
    np.maximum(by_hour, 0, out=by_hour)
    return Histogram(now_ms, by_minute.tolist(), by_hour.tolist(), edge)


def _bin(
    times: np.ndarray, counts: np.ndarray, now_ms: int, by_minute: np.ndarray, by_hour: np.ndarray
) -> None:
    ahead = np.maximum(times - now_ms, 0)
    hour = np.minimum(ahead // HOUR_MS, len(by_hour) - 1)
    by_hour += np.bincount(hour, weights=counts, minlength=len(by_hour)).astype(np.int64)
    soon = ahead < HOUR_MS
    by_minute += np.bincount(ahead[soon] // MINUTE_MS, weights=counts[soon], minlength=60).astype(
        np.int64
    )
