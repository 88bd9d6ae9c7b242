"""What the service holds for one assigned delay-topic partition.

A :class:`PartitionState` bundles the partition's :class:`TimerStore`, its commit
bookkeeping (:class:`OffsetTracker`) and its delivery pipeline: batches taken from the
store and produced, awaiting acknowledgement, in the order the store handed them out.
``commit_delivered`` moves only when the oldest batch is fully resolved, so a crash can
repeat only what was in flight (at-least-once, DESIGN §4).

Not thread-safe: owned by the service's loop thread.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from delaybridge.bridge.offsets import OffsetTracker
from delaybridge.timerlog import Clock, DeliveryCursor, DueRecord, StoreSettings, TimerStore


@dataclass(eq=False)
class Batch:
    """Records taken from one store in one call; resolved when every record is."""

    cursor: DeliveryCursor
    outstanding: int


@dataclass(eq=False)
class PartitionState:
    topic: str
    partition: int
    store: TimerStore
    offsets: OffsetTracker
    recovery_s: float
    batches: deque[Batch] = field(default_factory=deque)
    # Due records taken from the store but not produced yet (producer queue full,
    # rate limit): delivered first on the next turn, in order.
    held: deque[tuple[DueRecord, Batch]] = field(default_factory=deque)
    revoking: bool = False
    closed: bool = False
    rolled_seen: int = 0  # the store's rolled_total already reported to the metrics

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def origin_prefix(self) -> str:
        return f"{self.topic}/{self.partition}/"

    @property
    def in_flight(self) -> int:
        return sum(batch.outstanding for batch in self.batches)

    def resolve(self, batch: Batch) -> None:
        """One record of ``batch`` is delivered or dead-lettered (acked).

        An ack that arrives after the partition was closed changes nothing: its cursor
        was not committed, so the partition's next owner delivers the record again.
        """
        if self.closed:
            return
        batch.outstanding -= 1
        while self.batches and self.batches[0].outstanding == 0:
            done = self.batches.popleft()
            self.store.commit_delivered(done.cursor)

    def flush(self) -> None:
        """Make the store durable, then let the offsets follow it."""
        self.store.flush()
        self.offsets.store_flushed()

    def close(self) -> None:
        self.closed = True
        self.held.clear()
        self.batches.clear()
        self.store.close()


def open_partition(
    data_dir: Path,
    topic: str,
    partition: int,
    settings: StoreSettings,
    clock: Clock,
    committed_offset: int,
) -> PartitionState:
    """Open (recover) the partition's store and decide where consumption resumes.

    Resume at the later of the group's committed offset and one past the last source
    offset the store holds: the store is the source of truth for what it has, the
    committed offset also covers records that went elsewhere (cancels, dead letters).
    """
    started = time.monotonic()
    store = TimerStore.open(data_dir / f"{topic}-{partition}", settings, clock)
    start = max(committed_offset, store.last_source_offset + 1, 0)
    return PartitionState(
        topic=topic,
        partition=partition,
        store=store,
        offsets=OffsetTracker(start),
        recovery_s=time.monotonic() - started,
    )
