"""A snapshot of a store's counters, for metrics and the admin API."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StoreStats:
    """Counters of one store at one moment. Totals count since the store was created."""

    pending: int
    """Messages appended and neither delivered (committed) nor cancelled."""
    pending_by_topic: dict[str, int] = field(default_factory=dict)
    bytes_on_disk: int = 0
    """Allocated bytes of every file of the store (sparse files count what they use)."""
    read_lag_ms: int = 0
    """How far the wheel's read position trails the clock when something is due."""
    appended_total: int = 0
    delivered_total: int = 0
    cancelled_total: int = 0
    unknown_cancels_total: int = 0
    """Cancels that matched nothing, counted once their grace period ended."""
    waiting_cancels: int = 0
    """Unmatched cancels still inside their grace period."""
    rolled_total: int = 0
    """Times a message beyond the wheel's window was re-entered (RocketMQ's roll)."""
    commit_segments: int = 0
    timer_segments: int = 0
    last_source_offset: int = -1
