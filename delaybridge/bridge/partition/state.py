"""What the service holds for one assigned delay-topic partition.

A :class:`PartitionState` bundles the partition's :class:`TimerStore`, its commit
bookkeeping (:class:`OffsetTracker`) and its :class:`DeliveryPipeline` (due records on
their way out). :func:`open_partition` opens (recovers) the store and decides where
consumption resumes.

Not thread-safe: owned by the service's loop thread.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from delaybridge.bridge.commit.offsets import OffsetTracker
from delaybridge.bridge.partition.pipeline import DeliveryPipeline
from delaybridge.errors import IntegrityError
from delaybridge.timerlog import Clock, StoreSettings, TimerStore
from delaybridge.timerlog.errors import StoreLocked

PartKey = tuple[str, int]
log = logging.getLogger(__name__)
#: How long a store still locked by another process is waited for at assign: a worker
#: of the same pod that lost the partition (``bridge/workers/identity.py``) closes it when its
#: loop next turns. (A cooperative revoke always closes before the next owner's assign.)
LOCK_WAIT_S = 30.0


class Role(StrEnum):
    """What this replica does with a partition it holds (the ``role`` metric label)."""

    ACTIVE = "active"
    """Owned: ingesting and delivering."""
    RESTORING = "restoring"
    """Owned, its store still catching up with its changelog: nothing delivered yet."""
    STANDBY = "standby"
    """Not owned: a warm copy kept by tailing the changelog (``bridge/state/standby.py``)."""


@dataclass(eq=False)
class PartitionState:
    topic: str
    partition: int
    store: TimerStore
    offsets: OffsetTracker
    recovery_s: float
    pipeline: DeliveryPipeline = field(init=False)
    role: Role = Role.ACTIVE
    revoking: bool = False
    rolled_seen: int = 0  # the store's rolled_total already reported to the metrics
    corrupt_seen: tuple[int, int] = (0, 0)  # its corrupt/unreadable totals, likewise
    side_unacked: int = 0  # cancels and dead letters of its records not yet acked (side_writes.py)

    def __post_init__(self) -> None:
        self.pipeline = DeliveryPipeline(self.store)
        c = self.store.counters  # damage found before this process: reported back then
        self.corrupt_seen = (c.corrupt_records_total, c.unreadable_records_total)

    @property
    def key(self) -> PartKey:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def origin_prefix(self) -> str:
        return f"{self.topic}/{self.partition}/"

    @property
    def stored_upto(self) -> int:
        """The highest delay-topic offset whose schedule is already stored: in this
        store, or (after a restore) named by any changelog record. Ingest skips
        schedules at or below it (a re-read after a restart or a handover)."""
        seen = self.store.marks.source_seen
        return max(self.store.last_source_offset, -1 if seen is None else seen)

    @property
    def closed(self) -> bool:
        return self.pipeline.closed

    @property
    def in_flight(self) -> int:
        """Due records taken from the store and not yet resolved (held or produced)."""
        return self.pipeline.in_flight

    def replace_store(self, store: TimerStore) -> None:
        """Swap in another store (a restore from scratch); nothing may be in flight."""
        self.store = store
        self.pipeline = DeliveryPipeline(store)

    def close(self) -> None:
        self.pipeline.close()
        self.store.close()


def open_partition(
    data_dir: Path,
    topic: str,
    partition: int,
    settings: StoreSettings,
    clock: Clock,
    committed_offset: int,
    rebuildable: bool = False,
) -> PartitionState:
    """Open (recover) the partition's store and decide where consumption resumes.

    Resume at the later of the group's committed offset and the store's own resume mark
    (the lowest offset not durable at its last flush: schedules stored, cancels and dead
    letters acknowledged). Schedules the store already holds are skipped when re-read
    (``PartitionState.stored_upto``); cancels and dead letters are written again.

    ``rebuildable`` (the changelog is on): a store too damaged to open is kept aside as
    ``<store>.damaged-<unix time>`` and an empty one opened instead, which the restore
    then rebuilds from the changelog (no mark: rule 3 of ``state/restorer.py``) — instead of the
    pod failing the same way at every start.
    """
    started = time.monotonic()
    path = data_dir / f"{topic}-{partition}"
    try:
        store = _open_when_free(path, settings, clock)
    except IntegrityError as exc:
        if not rebuildable:
            raise
        aside = path.with_name(f"{path.name}.damaged-{int(time.time())}")
        log.error(
            "%s-%d: store cannot be opened (%s); kept as %s, restoring from the changelog",
            topic,
            partition,
            exc,
            aside,
        )
        path.rename(aside)
        store = TimerStore.open(path, settings, clock)
    resume = store.marks.source_resume
    start = max(committed_offset, 0 if resume is None else resume, 0)
    return PartitionState(
        topic=topic,
        partition=partition,
        store=store,
        offsets=OffsetTracker(start),
        recovery_s=time.monotonic() - started,
    )


def _open_when_free(path: Path, settings: StoreSettings, clock: Clock) -> TimerStore:
    """Open the store, waiting up to :data:`LOCK_WAIT_S` while another process has it."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            return TimerStore.open(path, settings, clock)
        except StoreLocked:
            if time.monotonic() >= deadline:
                raise
            log.info("%s: open in another process; waiting for it to close", path)
            time.sleep(0.2)
