"""The partitions this sidecar owns, from assignment to release: one place for all of it.

The consumer's rebalance callbacks (run inside ``consume()``, on the owner thread) land
here; what each means for durability and the offsets is the commit point's business
(``bridge/commit/``), asked at the right moment:

- **assign**: the commit point first (exactly-once: the open transaction commits, since
  opening big stores may outlast it); then open (recover) each partition's store, apply
  the cancels of the last grace period to it, resume consumption where the store and the
  group's committed offset say (``partition/state.py: open_partition``), plan its
  restore from the changelog, and start it paused if ingest is paused;
- **revoke**: stop ingesting it; the commit point hands it over (at-least-once: its
  values written, its in-flight records awaited up to ``shutdown_grace_ms``, its store
  flushed, its offset committed synchronously; exactly-once: the transaction commits);
  close it — unflushed if the handover did not commit;
- **lost** (the group moved on without us, typically Kafka unreachable for longer than
  the session timeout): nothing is committed. At-least-once, the partition is set aside
  with its store open until the delivery reports of what it had produced come (they do
  once Kafka is back), so those acknowledgements are recorded and flushed
  (:meth:`Partitions.settle_lost`) and nothing Kafka acknowledged is delivered again;
  if the group gives the partition back first, it is taken back as it is. Exactly-once,
  the transaction is aborted and the stores dropped unflushed. Either way the next owner
  re-reads from the last commit;
- **restart** (exactly-once, after an abort): every owned store is dropped unflushed
  and opened again from its last flush, as a restart of the process would.

Not thread-safe: the owner thread calls everything.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import TopicPartition

from delaybridge.bridge.cancels.feed import CancelFeed
from delaybridge.bridge.cancels.own_horizons import OwnHorizons
from delaybridge.bridge.commit.point import CommitPoint
from delaybridge.bridge.flow import FlowControl
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.partition.state import PartitionState, PartKey, Role, open_partition
from delaybridge.bridge.state.restore_hook import RestoreHook
from delaybridge.bridge.state.standby import Standbys
from delaybridge.connectors.edge import ConsumerEdge
from delaybridge.timerlog import Clock, StoreSettings

log = logging.getLogger(__name__)


class Partitions:
    """The assigned partitions and their life cycle (see the module docstring)."""

    def __init__(
        self,
        owned: dict[PartKey, PartitionState],
        commit: CommitPoint[PartitionState],
        data_dir: Path,
        store_settings: StoreSettings,
        clock: Clock,
        metrics: Metrics,
        flow: FlowControl,
        feed: CancelFeed | None = None,
        restoring: RestoreHook | None = None,
        standbys: Standbys | None = None,
        horizons: OwnHorizons | None = None,
    ) -> None:
        """``owned``: the dict of owned partitions, shared with ``commit``, which this
        keeps up to date; ``restoring``: the changelog's restore hook (None: changelog
        off); ``standbys``: warm standbys of partitions not owned here (None: none)."""
        self.by_key = owned
        self.commit = commit
        self._data_dir = data_dir
        self._store_settings = store_settings
        self._clock = clock
        self._metrics = metrics
        self._flow = flow
        self.feed = feed
        self.restoring = restoring
        self.standbys = standbys
        self._horizons = horizons
        self.rebalanced = False
        """True once the group assigned us partitions at least once (readiness)."""
        self.lost: dict[PartKey, PartitionState] = {}
        """Lost partitions whose deliveries' reports are still awaited (store open)."""

    def __iter__(self) -> Iterator[PartitionState]:
        return iter(self.by_key.values())

    def __len__(self) -> int:
        return len(self.by_key)

    # -- rebalance callbacks (inside consume(), on the owner thread) ---------------------

    def on_assign(self, consumer: ConsumerEdge, partitions: list[TopicPartition]) -> None:
        if not self.commit.before_assign(consumer):
            self.restart(consumer)
        committed = consumer.committed(partitions, timeout=30) if partitions else []
        starts, restoring = self._open(consumer, committed)
        for topic in {tp.topic for tp in partitions}:
            self._metrics.partitions.count_delay_topic(consumer, topic)
        consumer.incremental_assign(starts)
        self._flow.on_assigned(starts)
        if restoring:
            consumer.pause(restoring)  # resumed once restored (bridge/state/restore_hook.py)
        self.rebalanced = True

    def on_revoke(self, consumer: ConsumerEdge, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        for key in keys:
            if key in self.by_key:
                self.by_key[key].revoking = True
        committed = self.commit.hand_over(consumer, keys)
        for key in keys:
            self.close(key, abandon=not committed)
        consumer.incremental_unassign(partitions)
        if not committed and self.commit.alive:
            self.restart(consumer)

    def on_lost(self, consumer: ConsumerEdge, partitions: list[TopicPartition]) -> None:
        abandon = self.commit.lost()
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if abandon:
                self.close(key, abandon=True)
            else:
                self._set_aside(key)
        consumer.incremental_unassign(partitions)
        if abandon and self.commit.alive:
            self.restart(consumer)

    def consumer_died(self) -> None:
        """The group consumer failed for good (it is being replaced): every owned
        partition is lost, as :meth:`on_lost` loses them, with no consumer to tell."""
        abandon = self.commit.lost()
        for key in list(self.by_key):
            if abandon:
                self.close(key, abandon=True)
            else:
                self._set_aside(key)

    def _set_aside(self, key: PartKey) -> None:
        """A lost partition waits for its deliveries' reports (see the module docstring)."""
        part = self.by_key.pop(key, None)
        if part is None:
            return
        part.revoking = True  # ingest and delivery leave it alone
        self.lost[key] = part
        if self._horizons is not None:
            self._horizons.released([key])
        log.warning(
            "%s: group session lost; not ours any more. The delivery reports of its %d "
            "records in flight are awaited so that their acknowledgements are kept",
            part.name,
            part.pipeline.awaiting_reports,
        )

    def settle_lost(self) -> None:
        """Release the lost partitions whose deliveries' reports all came: their stores
        flushed with those acknowledgements (no commit: not ours), then closed."""
        for key, part in list(self.lost.items()):
            if part.pipeline.awaiting_reports:
                continue
            del self.lost[key]
            self.commit.release(part)
            self._close(part)

    def restart(self, consumer: ConsumerEdge) -> None:
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
            back = self._take_back((tp.topic, tp.partition))
            if back is not None:
                starts.append(back)
                continue
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

    def _take_back(self, key: PartKey) -> TopicPartition | None:
        """A lost partition the group gives back before it was released: taken back as
        it is (its store, its deliveries in flight, its offsets); where it resumes."""
        part = self.lost.pop(key, None)
        if part is None:
            return None
        part.revoking = False
        self.by_key[key] = part
        if self.feed is not None:  # the cancels read while it was set aside
            self.feed.open_store(part, self._clock.now_ms())
            if self.restoring is not None:
                self.restoring.changelog.removed_by_store(part)
        start = part.offsets.commit_position()
        log.info("%s is ours again, taken back as it was; resuming at offset %d", part.name, start)
        return TopicPartition(part.topic, part.partition, start)

    # -- release ----------------------------------------------------------------------------

    def next_due_ms(self, default_ms: int) -> int:
        """The earliest next due time of any owned store, or ``default_ms``."""
        stores = [p.store for p in self.by_key.values()]
        due = [d for s in stores if (d := s.next_due_ms(default_ms)) is not None]
        return min([default_ms, *due])

    def close(self, key: PartKey, *, abandon: bool = False) -> None:
        """Close one partition's store (flushed; its offset is the caller's business);
        ``abandon``: without a flush, as if the process died (exactly-once aborts)."""
        part = self.by_key.pop(key, None)
        if part is not None:
            self._close(part, abandon=abandon)

    def _close(self, part: PartitionState, *, abandon: bool = False) -> None:
        if self.restoring is not None:
            self.restoring.forget(part)
        if self._horizons is not None:
            self._horizons.released([part.key])
        part.pipeline.close()
        (part.store.abandon if abandon else part.store.close)()
        self._metrics.partitions.forget(part.topic, part.partition)
        log.info("released %s", part.name)

    def close_all(self) -> None:
        for key in list(self.by_key):
            self.close(key)
        for part in list(self.lost.values()):  # their reports did not come in time
            self.commit.release(part)
            self._close(part)
        self.lost.clear()
        if self.standbys is not None:
            self.standbys.close()
