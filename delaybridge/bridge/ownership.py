"""The partitions this sidecar owns, from assignment to release: one place for all of it.

The consumer's rebalance callbacks (run inside ``consume()``, on the owner thread) land
here:

- **assign**: open (recover) each partition's store, apply the cancels of the last grace
  period to it, resume consumption where the store and the group's committed offset say
  (``partition.open_partition``), and start it paused if ingest is paused;
- **revoke**: stop ingesting it, wait for its in-flight deliveries (bounded by
  ``shutdown_grace_ms``), flush its store, commit its offset synchronously, close it;
- **lost** (the group moved on without us): close without committing; the new owner
  re-reads from the last commit.

:meth:`Partitions.flush_and_commit` is the one durability point for every partition:
flush the stores, then commit the delay-topic offsets they cover (never ahead of the
data, DESIGN §4). :meth:`Partitions.drain` is the one wait for in-flight records, used
by revoke and by shutdown. Not thread-safe: the owner thread calls everything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Protocol

from confluent_kafka import KafkaException, TopicPartition

from delaybridge.bridge.cancels.feed import CancelFeed
from delaybridge.bridge.flow import FlowControl
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.partition.state import (
    NO_SPACE,
    PartitionState,
    PartKey,
    Role,
    open_partition,
)
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.state.changelog import SEEDING_MARK, UNACKED_MARK
from delaybridge.bridge.state.restore_hook import Restoring
from delaybridge.bridge.state.restorer import MARK
from delaybridge.bridge.state.standby import Standbys
from delaybridge.connectors.edge import ConsumerEdge
from delaybridge.timerlog import Clock, StoreSettings

log = logging.getLogger(__name__)


class TransactionHooks(Protocol):
    """What a rebalance does to the open transaction (``bridge/commit/exactly_once.py``)."""

    def commit(self, consumer: ConsumerEdge) -> bool: ...

    def abort(self, why: str) -> None: ...

    @property
    def alive(self) -> bool: ...  # False once the producer failed fatally


class Partitions:
    """The assigned partitions and their life cycle (see the module docstring)."""

    def __init__(
        self,
        data_dir: Path,
        store_settings: StoreSettings,
        clock: Clock,
        outbox: Outbox,
        metrics: Metrics,
        flow: FlowControl,
        grace_s: float,
    ) -> None:
        self._data_dir = data_dir
        self._store_settings = store_settings
        self._clock = clock
        self._outbox = outbox
        self._metrics = metrics
        self._flow = flow
        self._grace_s = grace_s
        self.feed: CancelFeed | None = None
        self.restoring: Restoring | None = None
        """The changelog's restore hook (None: changelog off)."""
        self.standbys: Standbys | None = None
        """Warm standbys of partitions not owned here (None: changelog.standby_replicas 0)."""
        self.by_key: dict[PartKey, PartitionState] = {}
        self.rebalanced = False
        """True once the group assigned us partitions at least once (readiness)."""
        self.transaction: TransactionHooks | None = None
        """Exactly-once mode: revoke commits the transaction, lost aborts it."""

    def __iter__(self) -> Iterator[PartitionState]:
        return iter(self.by_key.values())

    def __len__(self) -> int:
        return len(self.by_key)

    # -- rebalance callbacks (inside consume(), on the owner thread) ---------------------

    def on_assign(self, consumer: ConsumerEdge, partitions: list[TopicPartition]) -> None:
        if self.transaction is not None and not self.transaction.commit(consumer):
            self.reopen(consumer)  # commit first: opening big stores may outlast the txn
        committed = consumer.committed(partitions, timeout=30) if partitions else []
        starts, restoring = self._open(consumer, committed)
        for topic in {tp.topic for tp in partitions}:
            self._metrics.partitions.count_delay_topic(consumer, topic)
        consumer.incremental_assign(starts)
        self._flow.on_assigned(starts)
        if restoring:
            consumer.pause(restoring)  # resumed once restored (bridge/state/restore_hook.py)
        self.rebalanced = True

    def reopen(self, consumer: ConsumerEdge) -> None:
        """Exactly-once mode, after an abort: drop every owned partition's store as it
        is (no flush: it holds the aborted transaction's changes) and open it again
        from the last commit, as a restart would."""
        keys = list(self.by_key)
        for key in keys:
            self.close(key, abandon=True)
        if self.feed is not None:
            self.feed.rewind()  # the aborted transaction's cancels are applied again
        tps = [TopicPartition(topic, partition) for topic, partition in keys]
        if not tps:
            return
        starts, restoring = self._open(consumer, consumer.committed(tps, timeout=30))
        for tp in starts:
            consumer.seek(tp)
        if not self._flow.ingest_paused:
            consumer.resume([tp for tp in starts if tp not in restoring])
        if restoring:
            consumer.pause(restoring)

    def _open(
        self, consumer: ConsumerEdge, committed: list[TopicPartition]
    ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Open the stores of ``committed`` (partitions with their committed offsets);
        returns (where each resumes, those restoring first)."""
        starts = []
        restoring = []
        for tp in committed:
            if self.standbys is not None:
                self.standbys.release((tp.topic, tp.partition))  # promoted: its copy is ours
            part = open_partition(
                self._data_dir,
                tp.topic,
                tp.partition,
                self._store_settings,
                self._clock,
                tp.offset,
                rebuildable=self.restoring is not None,
            )
            self.by_key[part.key] = part
            self._metrics.partitions.store_recovered(part.topic, part.partition, part.recovery_s)
            if self.feed is not None:  # waits on replaces; the recent cancels apply
                self.feed.open_store(part, self._clock.now_ms())
                if self.restoring is not None:
                    self.restoring.changelog.removed_by_store(part)
            start = part.offsets.commit_position()
            starts.append(TopicPartition(part.topic, part.partition, start))
            if self.restoring is not None and self.restoring.begin(part, consumer):
                restoring.append(starts[-1])
            log.info(
                "assigned %s: store recovered in %.2f s, %d pending, %s at offset %d",
                part.name,
                part.recovery_s,
                part.store.stats().pending,
                "restoring from the changelog, then resuming"
                if part.role is Role.RESTORING
                else "resuming",
                start,
            )
        return starts, restoring

    def on_revoke(self, consumer: ConsumerEdge, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        for key in keys:
            if key in self.by_key:
                self.by_key[key].revoking = True
        if self.transaction is not None:  # exactly-once: commit, then hand over
            committed = self.transaction.commit(consumer)
            for key in keys:
                self.close(key, abandon=not committed)
            consumer.incremental_unassign(partitions)
            if not committed and self.transaction.alive:
                self.reopen(consumer)
            return
        if self.restoring is not None:  # write-behind values out before the handover
            self.restoring.changelog.write_all([self.by_key[k] for k in keys if k in self.by_key])
        self.drain(keys, time.monotonic() + self._grace_s)
        self.flush_and_commit(consumer, keys, sync=True)
        for key in keys:
            self.close(key)
        consumer.incremental_unassign(partitions)

    def on_lost(self, consumer: ConsumerEdge, partitions: list[TopicPartition]) -> None:
        if self.transaction is not None:  # its work on them must not commit
            self.transaction.abort("partitions lost")
        for tp in partitions:
            self.close((tp.topic, tp.partition), abandon=self.transaction is not None)
        consumer.incremental_unassign(partitions)
        if self.transaction is not None and self.transaction.alive:
            self.reopen(consumer)

    # -- durability and release -----------------------------------------------------------

    def drain(self, keys: Iterable[PartKey] | None, deadline_s: float) -> None:
        """Serve delivery reports until these partitions (default: all) have nothing in
        flight (deliveries, side writes, changelog values), or until ``deadline_s``."""
        chosen = self._select(keys)

        def busy() -> bool:  # deliveries, side writes or changelog values in flight
            return any(part.pipeline.in_flight or part.offsets.unacked for part in chosen())

        while busy() and time.monotonic() < deadline_s:
            self._outbox.poll(0.05)

    def commit_at_least_once(self, consumer: ConsumerEdge, deadline_s: float | None = None) -> bool:
        """The at-least-once checkpoint: changelog values out, reports served (until
        ``deadline_s`` at shutdown), then :meth:`flush_and_commit`."""
        if self.restoring is not None:  # the values held long enough; at shutdown all
            parts = list(self.by_key.values())
            changelog = self.restoring.changelog
            changelog.write_behind(parts) if deadline_s is None else changelog.write_all(parts)
        if deadline_s is None:
            self._outbox.poll(0)
        else:
            self.drain(None, deadline_s)
            self._outbox.flush(deadline_s - time.monotonic())
        return self.flush_and_commit(consumer)

    def next_due_ms(self, default_ms: int) -> int:
        """The earliest next due time of any owned store, or ``default_ms``."""
        stores = [p.store for p in self.by_key.values()]
        due = [d for s in stores if (d := s.next_due_ms(default_ms)) is not None]
        return min([default_ms, *due])

    def flush_and_commit(
        self, consumer: ConsumerEdge, keys: Iterable[PartKey] | None = None, *, sync: bool = False
    ) -> bool:
        """Flush the stores (default: all), then commit the offsets they cover. Returns
        False when a store could not be flushed (no space); its offset stays."""
        commits = []
        flushed = True
        for part in self._select(keys)():
            if self.restoring is not None and part.role is Role.ACTIVE:
                self.restoring.changelog.progress(part)
            if not self.flush_one(part):
                flushed = False
                continue
            position = part.offsets.take_commit()
            if position is not None:
                commits.append(TopicPartition(part.topic, part.partition, position))
        if not commits:
            return flushed
        try:
            if sync:
                consumer.commit(offsets=commits, asynchronous=False)
            else:
                consumer.commit(offsets=commits)
        except KafkaException as exc:
            log.warning("offset commit failed (retried at the next flush): %s", exc)
        return flushed

    def flush_one(self, part: PartitionState) -> bool:
        """Flush ``part``'s store with the changelog offset it now covers (mark
        ``changelog``); False when there is no space: its offset stays where the last
        flush left it, the next flush retries."""
        if self.restoring is not None and part.role is Role.ACTIVE:
            changelog = self.restoring.changelog
            marks = part.store.marks
            position = changelog.position(part)
            if position is not None and SEEDING_MARK not in marks:
                marks[MARK] = position
            if (unacked := changelog.unacked_from(part)) is not None:
                marks[UNACKED_MARK] = unacked  # written again after a crash (reseed)
            else:
                marks.pop(UNACKED_MARK, None)
        try:
            part.flush()
        except OSError as exc:
            if exc.errno not in NO_SPACE:
                raise
            log.warning("%s: cannot flush, no space left (%s)", part.name, exc)
            self._flow.set_disk_full(True)
            return False
        return True

    def close(self, key: PartKey, *, abandon: bool = False) -> None:
        """Close one partition's store (flushed; its offset is the caller's business);
        ``abandon``: without a flush, as if the process died (exactly-once aborts)."""
        part = self.by_key.pop(key, None)
        if part is None:
            return
        if self.restoring is not None:
            self.restoring.forget(part)
        part.pipeline.close()
        (part.store.abandon if abandon else part.store.close)()
        self._metrics.partitions.forget(part.topic, part.partition)
        log.info("released %s", part.name)

    def close_all(self) -> None:
        for key in list(self.by_key):
            self.close(key)
        if self.standbys is not None:
            self.standbys.close()

    def _select(self, keys: Iterable[PartKey] | None) -> Callable[[], list[PartitionState]]:
        if keys is None:
            return lambda: list(self.by_key.values())
        wanted = list(keys)
        return lambda: [self.by_key[k] for k in wanted if k in self.by_key]
