"""The ends of partitions, asked of the brokers with the admin client, without blocking.

Two parts of the sidecar ask the brokers where partitions end, over and over, from the
owner thread: the cancel horizon (every 50 ms, read_committed) and the consumer-lag
metric (every 5 s, the high watermark). Both need the same three things that a plain
``AdminClient.list_offsets`` does not give after a broker was away:

- **one request at a time**, answered through futures the owner thread looks at when it
  turns (librdkafka's thread sets them);
- **a request unanswered for ``timeout_ms`` is given up** and may be asked again: a
  request lost with its connection can stay unanswered for good;
- **a stale leader epoch is refreshed**: after a broker restart, librdkafka's admin
  client keeps asking with the leader epoch it cached and is refused with
  ``FENCED_LEADER_EPOCH`` at every request until its metadata is refreshed (measured on
  Kafka 4.3 with librdkafka 2.16: every request for as long as the client lived). An
  answer that says the leader or its epoch moved makes it ask for the topic's metadata,
  which updates the cache, before the next request.

Not thread-safe: one owner thread calls it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any, cast

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka.admin import OffsetSpec

from delaybridge.connectors.edge import AdminEdge

log = logging.getLogger(__name__)

Key = tuple[str, int]
LATEST: Any = cast(Any, OffsetSpec).latest()
#: Answers that mean the admin client's metadata is stale: the leader or its epoch moved.
STALE_METADATA = frozenset(
    {
        RdKafkaError.FENCED_LEADER_EPOCH,
        RdKafkaError.UNKNOWN_LEADER_EPOCH,
        RdKafkaError.NOT_LEADER_FOR_PARTITION,
    }
)
#: How long a refresh of the metadata may hold the caller (a broker answered just now).
REFRESH_TIMEOUT_S = 2.0


class EndOffsets:
    """Asks for the end of partitions, one request at a time, and hands out the answer."""

    def __init__(
        self, admin: AdminEdge, what: str, *, read_committed: bool, timeout_ms: int
    ) -> None:
        """``what``: what the ends are for, in the debug lines; ``read_committed``: the
        end below open transactions (else the high watermark); ``timeout_ms``: how long
        a request may stay unanswered before another may be asked."""
        self._admin = admin
        self._what = what
        self._isolation = (
            IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        )
        self._timeout_ms = timeout_ms
        self._futures: dict[TopicPartition, Future[Any]] | None = None
        self._asked_ms = 0
        self.failures: dict[Key, str] = {}
        """Per partition, why its last answer failed (until one does not), for the
        lines that say what something waits for."""

    def ask(self, partitions: Iterable[Key], now_ms: int) -> bool:
        """Ask for the ends of ``partitions``; False when not asked: one request is still
        in flight (for less than the timeout), there is nothing to ask, or the client
        refused the request (asked again at the next call)."""
        if self._futures is not None:
            waited = now_ms - self._asked_ms
            if waited < self._timeout_ms:
                return False
            log.debug("%s: offsets unanswered for %d ms: asking again", self._what, waited)
            self._futures = None
        wanted = {TopicPartition(t, p): LATEST for t, p in partitions}
        if not wanted:
            return False
        try:
            self._futures = self._admin.list_offsets(
                wanted,
                isolation_level=self._isolation,
                request_timeout=self._timeout_ms / 1000,
            )
        except KafkaException as exc:
            log.debug("%s: offsets not asked: %s", self._what, exc)
            return False
        self._asked_ms = now_ms
        return True

    def take(self) -> dict[Key, int] | None:
        """The answer to the request in flight once every partition of it is answered:
        the end of each partition that did not fail (a failure is left out: the next
        request asks again); None while waiting, or with no request in flight."""
        futures = self._futures
        if futures is None or not all(f.done() for f in futures.values()):
            return None
        self._futures = None
        ends: dict[Key, int] = {}
        stale: set[str] = set()
        for tp, future in futures.items():
            key = (tp.topic, tp.partition)
            try:
                ends[key] = int(future.result().offset)
                self.failures.pop(key, None)
            except KafkaException as exc:
                log.debug("%s: offsets of %s/%d: %s", self._what, tp.topic, tp.partition, exc)
                self.failures[key] = str(exc)
                err = exc.args[0] if exc.args else None
                if isinstance(err, RdKafkaError) and err.code() in STALE_METADATA:
                    stale.add(tp.topic)
        for topic in sorted(stale):
            try:
                self._admin.list_topics(topic, timeout=REFRESH_TIMEOUT_S)
            except KafkaException as exc:
                log.debug("%s: metadata of %s not refreshed: %s", self._what, topic, exc)
        return ends
