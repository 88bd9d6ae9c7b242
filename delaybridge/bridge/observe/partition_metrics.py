"""The sidecar's metrics per delay-topic partition: its store, its lag, its role.

Part of :class:`~delaybridge.bridge.observe.metrics.Metrics` (``metrics.partitions``), in the
same registry. A partition's series exist while this replica holds it and are removed
when it goes (:meth:`PartitionMetrics.forget`), so a dashboard never shows a stale value
for a partition another replica owns now. Labels: ``topic`` (a delay topic) and
``partition``; ``role`` is one of :class:`~delaybridge.bridge.partition.state.Role`'s values.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException
from prometheus_client import CollectorRegistry, Counter, Gauge

from delaybridge.connectors.edge import ConsumerEdge

log = logging.getLogger(__name__)


class PartitionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        labels = ["topic", "partition"]
        self._store_bytes = Gauge(
            "delaybridge_store_bytes", "Disk used by one partition's store.", labels, registry=r
        )
        self._consumer_lag = Gauge(
            "delaybridge_consumer_lag_messages",
            "Delay-topic high watermark minus the last offset stored.",
            labels,
            registry=r,
        )
        self._recovery = Gauge(
            "delaybridge_store_recovery_seconds",
            "How long opening (recovering) a store took.",
            labels,
            registry=r,
        )
        self._role = Gauge(
            "delaybridge_partition_role",
            "1 for each partition this replica holds, labelled with what it does with it "
            "(active, restoring, standby).",
            [*labels, "role"],
            registry=r,
        )
        self._restore_remaining = Gauge(
            "delaybridge_restore_remaining_records",
            "Changelog records a restoring partition has still to read (0 once restored).",
            labels,
            registry=r,
        )
        self._restored = Counter(
            "delaybridge_restored_records",
            "Changelog records read to restore a partition's store.",
            labels,
            registry=r,
        )
        self._standby_lag = Gauge(
            "delaybridge_standby_lag_records",
            "Changelog records a standby copy has not applied yet.",
            labels,
            registry=r,
        )
        self._delay_partitions = Gauge(
            "delaybridge_delay_topic_partitions",
            "Partitions of each delay topic (from metadata): compare with the active "
            "roles summed over replicas to find a partition nobody owns.",
            ["topic"],
            registry=r,
        )
        self._roles: dict[tuple[str, str], str] = {}

    def set_store_bytes(self, topic: str, partition: int, n_bytes: int) -> None:
        self._store_bytes.labels(topic, str(partition)).set(n_bytes)

    def set_consumer_lag(self, topic: str, partition: int, messages: int) -> None:
        self._consumer_lag.labels(topic, str(partition)).set(messages)

    def store_recovered(self, topic: str, partition: int, seconds: float) -> None:
        self._recovery.labels(topic, str(partition)).set(seconds)

    def set_role(self, topic: str, partition: int, role: str) -> None:
        key = (topic, str(partition))
        old = self._roles.get(key)
        if old == role:
            return
        if old is not None:
            self._role.remove(*key, old)
        self._role.labels(*key, role).set(1)
        self._roles[key] = role

    def set_restore(self, topic: str, partition: int, remaining: int, read: int) -> None:
        """Restore progress: records left, and records read since the last call."""
        self._restore_remaining.labels(topic, str(partition)).set(remaining)
        if read:
            self._restored.labels(topic, str(partition)).inc(read)

    def set_standby_lag(self, topic: str, partition: int, records: int) -> None:
        self._standby_lag.labels(topic, str(partition)).set(records)

    def set_delay_topic_partitions(self, topic: str, partitions: int) -> None:
        self._delay_partitions.labels(topic).set(partitions)

    def count_delay_topic(self, consumer: ConsumerEdge, topic: str) -> None:
        """Publish the delay topic's partition count (to find partitions nobody owns)."""
        try:
            found = consumer.list_topics(topic, timeout=10).topics.get(topic)
        except KafkaException as exc:
            log.warning("partition count of %r unknown: %s", topic, exc)
            return
        if found is not None and found.partitions:
            self.set_delay_topic_partitions(topic, len(found.partitions))

    def forget(self, topic: str, partition: int) -> None:
        """Drop a released partition's series (a no-op for series never set)."""
        key = (topic, str(partition))
        for gauge in (
            self._store_bytes,
            self._consumer_lag,
            self._recovery,
            self._restore_remaining,
            self._standby_lag,
        ):
            gauge.remove(*key)
        role = self._roles.pop(key, None)
        if role is not None:
            self._role.remove(*key, role)
