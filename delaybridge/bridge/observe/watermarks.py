"""The delay-topic partitions' high watermarks, for the consumer-lag metric.

librdkafka keeps each partition's high watermark from its fetch responses, and hands
it out for free (``get_watermark_offsets(cached=True)``). But a *paused* partition is
not fetched: its cached watermark stays where it was when ingest paused (measured on
Kafka 4.3: 10 while the partition held 35). So during a disk or back-pressure pause --
just when an operator looks at it -- the lag gauge showed a stale value, and it stayed
stale for as long as the pause lasted (issue 25: "stale in one of three runs").

Now the watermarks are also asked of the brokers every :data:`REFRESH_S`
(``connectors/end_offsets.py``: the admin client's ``list_offsets``, latest offset,
asynchronously, a request unanswered given up, a stale leader epoch refreshed): the
answer is used by the publish after it arrives, and the larger of the two values wins (a
watermark only grows). A partition whose request failed keeps its cached value. Not
thread-safe: the service's owner thread calls it (the futures are set by librdkafka's
thread, which is what futures are for).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from confluent_kafka import KafkaException, TopicPartition

from delaybridge.connectors.edge import AdminEdge, ConsumerEdge
from delaybridge.connectors.end_offsets import EndOffsets

REFRESH_S = 5.0
"""How often the brokers are asked (the metrics are published every flush, 200 ms)."""
REQUEST_TIMEOUT_MS = 10_000

Key = tuple[str, int]


class Watermarks:
    """The high watermark of each delay-topic partition: cached, or asked for."""

    def __init__(self, admin: AdminEdge, clock_s: Callable[[], float] = time.monotonic) -> None:
        self._ends = EndOffsets(
            admin, "consumer-lag watermarks", read_committed=False, timeout_ms=REQUEST_TIMEOUT_MS
        )
        self._clock_s = clock_s
        self._asked_at_s: float | None = None
        self._listed: dict[Key, int] = {}

    def refresh(self, keys: Iterable[Key]) -> None:
        """Take the answer that came, and ask again every :data:`REFRESH_S`."""
        answer = self._ends.take()
        if answer is not None:
            self._listed = answer
        now = self._clock_s()
        if self._asked_at_s is not None and now - self._asked_at_s < REFRESH_S:
            return
        if self._ends.ask(keys, int(now * 1000)):
            self._asked_at_s = now

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
