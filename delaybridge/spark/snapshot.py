"""A consistent, bounded snapshot of topic offsets, taken once before Spark reads.

Spark's Kafka source resolves ``"latest"`` each time a query plans, so two actions on
the same DataFrame may see different data. The job instead asks the brokers once for
every partition's range and hands Spark explicit offsets (``startingOffsets`` /
``endingOffsets`` as JSON): every count in the report describes the same records, and
the report names them.

* start: the earliest offset, or the first offset at or after ``since_ms``;
* end: the last stable offset (``read_committed``: open transactions are not read), or
  the first offset at or after ``until_ms`` (exclusive).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from delaybridge.connectors import KafkaClients, KafkaSettings, wrap
from delaybridge.errors import KafkaError

_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PartitionRange:
    """Offsets ``[start, end)`` of one partition."""

    partition: int
    start: int
    end: int

    @property
    def records(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True)
class TopicRanges:
    topic: str
    partitions: tuple[PartitionRange, ...]
    exists: bool = True

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)


def spark_offsets(ranges: list[TopicRanges]) -> tuple[str, str]:
    """``(startingOffsets, endingOffsets)`` JSON for Spark, for topics that exist."""
    start: dict[str, dict[str, int]] = {}
    end: dict[str, dict[str, int]] = {}
    for topic in ranges:
        if not topic.exists:
            continue
        start[topic.topic] = {str(p.partition): p.start for p in topic.partitions}
        end[topic.topic] = {str(p.partition): p.end for p in topic.partitions}
    return json.dumps(start, sort_keys=True), json.dumps(end, sort_keys=True)


def take_snapshot(
    kafka: KafkaSettings,
    topics: list[str],
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    missing_ok: bool = False,
) -> list[TopicRanges]:
    """Resolve the offset range of every partition of ``topics``.

    A topic that does not exist raises :class:`KafkaError`, unless ``missing_ok`` (target
    topics: the sidecar may never have delivered to one), in which case it has no ranges.
    """
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin._listoffsets import OffsetSpec

    # A metadata request for a missing topic must not create it (brokers default to
    # auto.create.topics.enable=true, and librdkafka's admin client would ask for it).
    admin = KafkaClients(kafka).admin({"allow.auto.create.topics": False})
    result: list[TopicRanges] = []
    for topic in topics:
        try:
            metadata = admin.list_topics(topic=topic, timeout=_TIMEOUT_S).topics[topic]
        except KafkaException as exc:
            raise wrap(exc, f"reconcile: cannot read metadata of topic {topic!r}") from exc
        if metadata.error is not None or not metadata.partitions:
            if missing_ok:
                result.append(TopicRanges(topic, (), exists=False))
                continue
            raise KafkaError(
                f"reconcile: topic {topic!r} cannot be read: {metadata.error}",
                code=metadata.error.name() if metadata.error is not None else None,
            )
        partitions = [TopicPartition(topic, p) for p in sorted(metadata.partitions)]
        earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        start_spec = earliest if since_ms is None else OffsetSpec.for_timestamp(since_ms)
        starts = _offsets(admin, partitions, start_spec, IsolationLevel)
        stable = _offsets(admin, partitions, latest, IsolationLevel)
        if until_ms is None:
            ends = stable
        else:
            ends = _offsets(admin, partitions, OffsetSpec.for_timestamp(until_ms), IsolationLevel)
        ranges = []
        for tp in partitions:
            p = tp.partition
            # for_timestamp answers -1 when no record is that recent: the range ends (or
            # starts) at the last stable offset.
            end = stable[p] if ends[p] < 0 else min(ends[p], stable[p])
            start = end if starts[p] < 0 else min(starts[p], end)
            ranges.append(PartitionRange(p, start, end))
        result.append(TopicRanges(topic, tuple(ranges)))
    return result


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _offsets(admin: Any, partitions: list[Any], spec: Any, isolation: Any) -> dict[int, int]:
    from confluent_kafka import KafkaException

    futures = admin.list_offsets(
        {tp: spec for tp in partitions},
        isolation_level=isolation.READ_COMMITTED,
        request_timeout=_TIMEOUT_S,
    )
    offsets: dict[int, int] = {}
    for tp, future in futures.items():
        try:
            offsets[tp.partition] = future.result().offset
        except KafkaException as exc:
            raise wrap(exc, f"reconcile: cannot list offsets of {tp.topic}/{tp.partition}") from exc
    return offsets
