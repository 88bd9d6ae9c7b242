"""From the loop's state to the Prometheus metrics, once per flush interval.

:meth:`Telemetry.publish` sets the gauges from snapshots (per-store stats, consumer
lag from the high watermarks -- librdkafka's cached ones, and the brokers' answers for
the partitions a pause keeps from being fetched: ``observe/watermarks.py`` -- the
in-flight and backlog sizes, the flow-control and transaction state), adds what the
stores counted themselves (rolls, corrupt records: totals in their stats) to the
:class:`~delaybridge.bridge.observe.tally.Tally`, and drains the tally (counts since
the last refresh, from every part of the loop) into the counters. It returns the
totals flow control decides on. Not thread-safe: the owner thread calls it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition

from delaybridge.bridge.commit.transactions import Transactions
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.observe.watermarks import Watermarks
from delaybridge.bridge.partition.state import PartitionState
from delaybridge.bridge.state.restore_hook import RestoreHook
from delaybridge.bridge.state.standby import Standbys
from delaybridge.connectors.edge import ConsumerEdge


@dataclass(frozen=True, slots=True)
class Load:
    """What flow control looks at."""

    pending: int
    """Messages stored in every owned partition, not yet delivered or cancelled."""
    backlog: int
    """Due records taken from the stores and not yet resolved (held or in flight)."""
    queued: int = 0
    """Records of every kind in the producer's queue, not yet acknowledged."""


#: How often the stores' bytes on disk (a ``stat`` of every file of every store) are
#: measured again: at every flush, they were a large part of an idle sidecar's CPU.
DISK_BYTES_EVERY_S = 5.0


class Telemetry:
    def __init__(
        self,
        metrics: Metrics,
        tally: Tally,
        restoring: RestoreHook | None = None,
        standbys: Standbys | None = None,
        replace_waits: Sized | None = None,
        transactions: Transactions | None = None,
        watermarks: Watermarks | None = None,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self._clock_s = clock_s
        self._disk_at_s = -DISK_BYTES_EVERY_S
        self._watermarks = watermarks
        self._tally = tally
        self._restoring = restoring
        self._standbys = standbys
        self._replace_waits = replace_waits
        self._transactions = transactions
        self._standby_keys: set[tuple[str, int]] = set()

    def publish(
        self, parts: Iterable[PartitionState], consumer: ConsumerEdge, in_flight: int
    ) -> Load:
        m = self._metrics
        t = self._tally
        pending_by_topic: dict[str, int] = {}
        pending = backlog = side_unacked = 0
        lag_s = 0.0
        owned = list(parts)
        if self._watermarks is not None:
            self._watermarks.refresh(p.key for p in owned)
        now_s = self._clock_s()
        disk = now_s - self._disk_at_s >= DISK_BYTES_EVERY_S
        if disk:
            self._disk_at_s = now_s
        for part in owned:
            stats = part.store.stats(disk=disk)
            pending += stats.pending
            backlog += part.pipeline.in_flight
            side_unacked += part.side_unacked
            for topic, n in stats.pending_by_topic.items():
                pending_by_topic[topic] = pending_by_topic.get(topic, 0) + n
            lag_s = max(lag_s, stats.read_lag_ms / 1000)
            if disk:
                m.partitions.set_store_bytes(part.topic, part.partition, stats.bytes_on_disk)
            m.partitions.set_role(part.topic, part.partition, part.role.value)
            if stats.rolled_total > part.rolled_seen:
                t.rolled += stats.rolled_total - part.rolled_seen
                part.rolled_seen = stats.rolled_total
            corrupt = (stats.corrupt_records_total, stats.unreadable_records_total)
            if corrupt != part.corrupt_seen:
                (c0, u0) = part.corrupt_seen
                (c1, u1) = corrupt
                t.store_corrupt["true"] += max(0, (c1 - u1) - (c0 - u0))
                t.store_corrupt["false"] += max(0, u1 - u0)
                part.corrupt_seen = corrupt
            high = self._high(consumer, part.topic, part.partition)
            if high is None:
                continue  # neither a fetch nor the brokers told it yet: kept as it was
            m.partitions.set_consumer_lag(
                part.topic, part.partition, max(0, high - 1 - stats.last_source_offset)
            )
        if self._restoring is not None:
            for part, remaining, read in self._restoring.progress():
                m.partitions.set_restore(part.topic, part.partition, remaining, read)
        if self._standbys is not None:
            keys = set()
            for part, lag in self._standbys.lag():
                keys.add(part.key)
                m.partitions.set_role(part.topic, part.partition, part.role.value)
                m.partitions.set_standby_lag(part.topic, part.partition, lag)
            for gone in self._standby_keys - keys - {p.key for p in owned}:
                m.partitions.forget(*gone)
            self._standby_keys = keys
        # Before the pending gauge: the counters' topics take the label budget first.
        m.count(t.drain())
        if self._transactions is not None:
            m.set_transaction_consecutive_aborts(self._transactions.consecutive_aborts)
        m.set_pending(pending_by_topic)
        m.set_wheel_read_lag_seconds(lag_s)
        m.set_in_flight(in_flight)
        m.set_delivery_backlog(backlog)
        m.set_side_writes_unacked(side_unacked)
        if self._replace_waits is not None:
            m.set_replace_waits(len(self._replace_waits))
        m.set_assigned_partitions(len(owned))
        m.heartbeat()
        return Load(pending, backlog, in_flight)

    def _high(self, consumer: ConsumerEdge, topic: str, partition: int) -> int | None:
        """A partition's high watermark (:mod:`~delaybridge.bridge.observe.watermarks`)."""
        if self._watermarks is not None:
            return self._watermarks.high(consumer, topic, partition)
        try:
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), cached=True
            )
        except KafkaException:
            return None
        return int(high)
