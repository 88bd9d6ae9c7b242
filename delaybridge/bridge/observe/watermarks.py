"""The delay-topic partitions' high watermarks, for the consumer-lag metric.

librdkafka keeps each partition's high watermark from its fetch responses, and hands
it out for free (``get_watermark_offsets(cached=True)``). But a *paused* partition is
not fetched: its cached watermark stays where it was when ingest paused (measured on
Kafka 4.3: 10 while the partition held 35). So during a disk or back-pressure pause --
just when an operator looks at it -- the lag gauge showed a stale value, and it stayed
stale for as long as the pause lasted (issue 25: "stale in one of three runs").

Now the watermarks are also asked of the brokers every :data:`REFRESH_S` with the admin
client's ``list_offsets`` (latest offset), asynchronously: the answer is used by the
publish after it arrives, and the larger of the two values wins (a watermark only grows).
At most one request is in flight; one that fails is dropped, and the cached value
stands. Not thread-safe: the service's owner thread calls it (the futures are set by
librdkafka's thread, which is what futures are for).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, cast

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from delaybridge.connectors.edge import AdminEdge, ConsumerEdge

REFRESH_S = 5.0
"""How often the brokers are asked (the metrics are published every flush, 200 ms)."""
REQUEST_TIMEOUT_S = 10.0
LATEST: Any = cast(Any, OffsetSpec).latest()

Key = tuple[str, int]


class Watermarks:
    """The high watermark of each delay-topic partition: cached, or asked for."""

    def __init__(self, admin: AdminEdge, clock_s: Callable[[], float] = time.monotonic) -> None:
        self._admin = admin
        self._clock_s = clock_s
        self._asked: dict[Key, Future[Any]] = {}
        self._asked_at_s: float | None = None
        self._listed: dict[Key, int] = {}

    def refresh(self, keys: Iterable[Key]) -> None:
        """Take the answers that came, and ask again every :data:`REFRESH_S`."""
        if self._asked:
            if not all(f.done() for f in self._asked.values()):
                return  # one request at a time
            self._listed = {
                key: int(future.result().offset)
                for key, future in self._asked.items()
                if future.exception() is None
            }
            self._asked = {}
        now = self._clock_s()
        if self._asked_at_s is not None and now - self._asked_at_s < REFRESH_S:
            return
        wanted = {TopicPartition(t, p): LATEST for t, p in keys}
        if not wanted:
            return
        self._asked_at_s = now
        try:
            futures = self._admin.list_offsets(wanted, request_timeout=REQUEST_TIMEOUT_S)
        except KafkaException:
            return  # asked again at the next refresh; the cached values stand
        self._asked = {(tp.topic, tp.partition): f for tp, f in futures.items()}

    def high(self, consumer: ConsumerEdge, topic: str, partition: int) -> int | None:
        """The partition's high watermark (one past its last offset); None if neither
        a fetch nor the brokers told it yet."""
        cached: int | None = None
        try:
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), cached=True
            )
            cached = int(high) if high >= 0 else None  # -1001: not fetched yet
        except KafkaException:
            pass  # not assigned (any more)
        listed = self._listed.get((topic, partition))
        if cached is None or listed is None:
            return cached if listed is None else listed
        return max(cached, listed)
