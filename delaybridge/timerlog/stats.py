"""A store's counters: the running totals it keeps, and the snapshot it reports."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class StoreCounters:
    """Running totals of one store since it was created.

    The one list of them: the store holds one instance and adds to it, every
    checkpoint saves it (as top-level fields of the checkpoint's JSON, under these
    names) and :class:`StoreStats` carries a copy. Adding a counter is one line here;
    a checkpoint written before the counter existed loads it as 0.
    """

    appended_total: int = 0
    """Messages appended (roll copies not included)."""
    delivered_total: int = 0
    """Messages marked delivered."""
    cancelled_total: int = 0
    """Pending messages a cancel matched."""
    unknown_cancels_total: int = 0
    """Cancels that matched nothing, counted once their grace period ended."""
    rolled_total: int = 0
    """Times a message beyond the wheel's window was re-entered (RocketMQ's roll)."""
    removed_total: int = 0
    """Pending messages dropped by key (a changelog tombstone applied by a restore)."""
    corrupt_records_total: int = 0
    """Stored records that failed their CRC when read (quarantined: :mod:`quarantine`)."""
    unreadable_records_total: int = 0
    """Of those, the ones too damaged to say what they were (skipped, not dead-lettered)."""
    replaced_total: int = 0
    """Pending messages a later schedule with the same id replaced."""


@dataclass(slots=True, kw_only=True)
class StoreStats(StoreCounters):
    """Counters of one store at one moment: the totals, then gauges of this moment.

    A snapshot: the store builds a new one per :meth:`TimerStore.stats` call and never
    changes it afterwards. (Not a frozen dataclass only because it extends
    :class:`StoreCounters`, which the store updates in place.)
    """

    pending: int
    """Messages appended and neither delivered nor cancelled."""
    pending_by_topic: dict[str, int] = field(default_factory=dict)
    bytes_on_disk: int = 0
    """Allocated bytes of every file of the store (sparse files count what they use)."""
    read_lag_ms: int = 0
    """How far the wheel's read position trails the clock when something is due."""
    waiting_cancels: int = 0
    """Unmatched cancels still inside their grace period."""
    commit_segments: int = 0
    timer_segments: int = 0
    last_source_offset: int = -1
