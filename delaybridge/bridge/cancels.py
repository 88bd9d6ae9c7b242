"""Cancels reach every store, whichever delay-topic partition they landed in.

A cancel is a record in *some* delay-topic partition, but the message it cancels may sit
in another partition, owned by another sidecar (a peer's known bug: cancels lost because
the producer's partitioner put them elsewhere). So the sidecar that consumes a cancel
does not apply it itself; it re-publishes it to the cancel topic (key = the id), and
every sidecar reads the whole cancel topic (manual assignment, no group) and applies
each cancel to every store it holds. Cancels are tiny and rare next to messages.

Protocol:

1. ingest: a cancel record from delay partition P is produced to the cancel topic; P's
   offset commits only once that produce is acknowledged (so it is never lost);
2. every sidecar's :class:`CancelFeed` consumes the cancel topic from
   ``now - cancel_grace_ms`` at start-up, and applies each cancel to all open stores;
3. cancels seen in the last ``cancel_grace_ms`` are kept (:attr:`recent`) and applied to
   a store when it is opened later (a partition moving in from another sidecar);
4. each store also keeps an unmatched cancel for its own grace period, so a cancel that
   overtakes its message (the message's partition lags) still wins when it arrives.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass

import orjson
from confluent_kafka import Consumer, KafkaException, TopicPartition

from delaybridge.bridge.partition import PartitionState
from delaybridge.bridge.settings import KafkaSettings
from delaybridge.connectors.kafka import make_consumer, wrap
from delaybridge.errors import KafkaError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CancelRequest:
    id: str
    target_topic: str | None
    origin: str

    def encode(self) -> bytes:
        return orjson.dumps(
            {"id": self.id, "target_topic": self.target_topic, "origin": self.origin}
        )

    @classmethod
    def decode(cls, raw: bytes) -> CancelRequest:
        doc = orjson.loads(raw)
        return cls(str(doc["id"]), doc.get("target_topic"), str(doc.get("origin", "")))


def apply_cancels(parts: Iterable[PartitionState], requests: list[CancelRequest]) -> list[bool]:
    """Apply a batch of cancels to every store; per request, did any store match it?"""
    if not requests:
        return []
    pairs = [(r.id, r.target_topic) for r in requests]
    hit = [False] * len(pairs)
    for part in parts:
        for i, matched in enumerate(part.store.cancel(pairs)):
            hit[i] = hit[i] or matched
    return hit


class CancelLedger:
    """Applies cancels and counts each one once, for the metrics.

    A cancel is *matched* when a store of this sidecar held its message, *unknown*
    otherwise. The admin API applies a cancel locally and publishes it, so the same
    cancel comes back from the feed and matches nothing the second time: ids matched in
    the last ``grace_ms`` are remembered (at most ``limit``) and not counted again.
    """

    def __init__(self, grace_ms: int, limit: int = 100_000) -> None:
        self._grace_ms = grace_ms
        self._limit = limit
        self._recent: OrderedDict[tuple[str, str | None], int] = OrderedDict()
        self.matched = 0
        self.unknown = 0

    def apply(
        self, parts: Iterable[PartitionState], requests: list[CancelRequest], now_ms: int
    ) -> list[bool]:
        while self._recent and (
            len(self._recent) > self._limit
            or next(iter(self._recent.values())) < now_ms - self._grace_ms
        ):
            self._recent.popitem(last=False)
        hits = apply_cancels(parts, requests)
        for request, hit in zip(requests, hits, strict=True):
            key = (request.id, request.target_topic)
            if hit:
                self.matched += 1
                self._recent[key] = now_ms
                self._recent.move_to_end(key)
            elif key not in self._recent:
                self.unknown += 1
        return hits

    def drain(self) -> tuple[int, int]:
        """(matched, unknown) since the last drain."""
        counts = (self.matched, self.unknown)
        self.matched = self.unknown = 0
        return counts


class CancelFeed:
    """Reads the cancel topic; one owner thread (the service loop)."""

    def __init__(self, kafka: KafkaSettings, topic: str, grace_ms: int) -> None:
        self._topic = topic
        self._grace_ms = grace_ms
        # No group membership: every sidecar reads every partition. (group.id is only
        # there because librdkafka wants one; nothing is ever committed.)
        plain = kafka.model_copy(update={"instance_id": ""})
        self._consumer: Consumer = make_consumer(
            plain, **{"group.id": f"{kafka.group_id}.cancel-feed"}
        )
        self.recent: deque[tuple[int, CancelRequest]] = deque()

    def start(self, now_ms: int, timeout_s: float) -> None:
        """Assign every partition of the cancel topic, from ``now - grace`` on."""
        deadline = time.monotonic() + timeout_s
        while True:  # a topic created a moment ago may not show its partitions yet
            metadata = self._consumer.list_topics(self._topic, timeout=timeout_s)
            topic = metadata.topics.get(self._topic)
            if topic is not None and topic.error is None and topic.partitions:
                break
            if time.monotonic() >= deadline:
                why = topic.error if topic is not None else "not in the metadata"
                raise KafkaError(f"cancel topic {self._topic!r} is not usable: {why}")
            time.sleep(0.2)
        wanted = [TopicPartition(self._topic, p, now_ms - self._grace_ms) for p in topic.partitions]
        try:
            found = self._consumer.offsets_for_times(wanted, timeout=timeout_s)
        except KafkaException as exc:
            raise wrap(exc, f"offsets of cancel topic {self._topic!r}") from exc
        # No record at or after that time: start at the end (offset -1 = OFFSET_END).
        self._consumer.assign(
            [
                TopicPartition(self._topic, tp.partition, tp.offset if tp.offset >= 0 else -1)
                for tp in found
            ]
        )

    def poll(self, now_ms: int, max_records: int = 10_000) -> list[CancelRequest]:
        out: list[CancelRequest] = []
        for msg in self._consumer.consume(max_records, timeout=0):
            err = msg.error()
            if err is not None:
                if not err.retriable() and err.fatal():
                    raise RuntimeError(f"cancel topic {self._topic!r}: {err.str()}")
                continue
            raw = msg.value()
            try:
                request = CancelRequest.decode(raw if raw is not None else b"")
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                log.warning(
                    "cancel topic %s/%s/%s: unreadable cancel (%s); ignored",
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    exc,
                )
                continue
            out.append(request)
            self.recent.append((now_ms, request))
        while self.recent and self.recent[0][0] < now_ms - self._grace_ms:
            self.recent.popleft()
        return out

    def close(self) -> None:
        self._consumer.close()
