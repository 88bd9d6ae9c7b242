"""TimerStore: the public face of one delay-topic partition's store (skeleton)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from delaybridge.timerlog.clock import SYSTEM_CLOCK, Clock
from delaybridge.timerlog.records import DeliveryCursor, DueRecord, TimerRecord
from delaybridge.timerlog.settings import StoreSettings
from delaybridge.timerlog.stats import StoreStats


class TimerStore:
    """Commit log + timer log + time wheel for one delay-topic partition.

    Not thread-safe: one owner thread calls every method (no locks in the hot path).
    """

    @classmethod
    def open(
        cls, directory: Path, settings: StoreSettings, clock: Clock = SYSTEM_CLOCK
    ) -> TimerStore:
        """Create the store in ``directory`` or recover the one there.

        Raises ConfigError naming ``tick_ms`` or ``wheel_slots`` when they differ from
        the files, IntegrityError (file + offset) when flushed data is corrupt.
        """
        raise NotImplementedError

    def append(self, records: Sequence[TimerRecord]) -> None:
        """Store a batch; due times in the past are due at once. Durable after flush()."""
        raise NotImplementedError

    def cancel(self, ids: Sequence[tuple[str, str | None]]) -> list[bool]:
        """Cancel (id, target_topic or None) pairs; True where a pending message matched."""
        raise NotImplementedError

    def flush(self) -> None:
        """fsync data, then write the checkpoint: everything before this call is durable."""
        raise NotImplementedError

    @property
    def last_source_offset(self) -> int:
        """Highest source offset appended (durable after flush), -1 when none."""
        raise NotImplementedError

    def take_due(self, max_records: int) -> list[DueRecord]:
        """Up to ``max_records`` due messages in delivery order."""
        raise NotImplementedError

    def next_due_ms(self) -> int | None:
        """Earliest time something may become due, None when nothing is pending."""
        raise NotImplementedError

    def commit_delivered(self, cursor: DeliveryCursor) -> None:
        """Everything up to ``cursor`` was delivered; durable at the next flush()."""
        raise NotImplementedError

    def lookup(self, id: str) -> TimerRecord | None:
        """The pending message with this id, or None."""
        raise NotImplementedError

    def stats(self) -> StoreStats:
        """Counters for metrics and the admin API."""
        raise NotImplementedError

    def close(self) -> None:
        """Flush and release files and maps."""
        raise NotImplementedError
