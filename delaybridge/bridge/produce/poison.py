"""Exactly-once mode: records that failed are not produced into the next transaction.

In at-least-once mode a failed produce is judged by its delivery report (retry later,
shrink, dead-letter: ``bridge/delivery/attempts.py``, ``bridge/ingest/side_writes.py``).
In exactly-once mode one failed record dooms its whole transaction: it is aborted and
every owned partition restarts from the last commit, which makes the same record due
(or read) again. So that the next transaction does not fail the same way, forever:

- :class:`Poisoned` remembers each failed record (partition, offset, generation, and
  whether it was going to the dead-letter topic) with its error and shrink step; on its
  next try the sidecar applies the failure rules to the remembered error *without*
  producing it (parked for a later retry, or dead-lettered);
- :class:`TargetCheck` asks the cluster's metadata (cached) whether a target topic and
  partition exist before producing, so a missing topic is a local failure (retried
  with backoff, then dead-lettered) and never aborts a transaction.

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import Any

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException

from delaybridge.bridge.partition.copies import generation_of
from delaybridge.timerlog import TimerRecord

log = logging.getLogger(__name__)


class Poisoned:
    """Failed records of aborted transactions: key -> (error, shrink step)."""

    def __init__(self) -> None:
        self._failed: dict[Hashable, tuple[RdKafkaError, int]] = {}

    def __bool__(self) -> bool:
        return bool(self._failed)

    def __len__(self) -> int:
        return len(self._failed)

    def remember(self, key: Hashable, err: RdKafkaError, shrink: int = 0) -> None:
        """``shrink``: the step to write it at next time. A record purged because
        another one failed did not fail itself: forgotten, unless it was already being
        shrunk (then it keeps its step, instead of starting over too large)."""
        if err.code() == RdKafkaError._PURGE_QUEUE and not shrink:
            return
        self._failed[key] = (err, shrink)

    def take(self, key: Hashable) -> tuple[RdKafkaError, int] | None:
        return self._failed.pop(key, None)

    def peek(self, key: Hashable) -> tuple[RdKafkaError, int] | None:
        """Without forgetting it: a side write read again after *any* later abort (its
        own write acknowledged in a transaction that another record doomed) must not
        start over too large."""
        return self._failed.get(key)


class TargetCheck:
    """Does a target topic (and partition) exist? From metadata, cached ``ttl_s``."""

    def __init__(self, list_topics: Callable[[str, float], Any], ttl_s: float = 10.0) -> None:
        self._list_topics = list_topics
        self._ttl_s = ttl_s
        self._partitions: dict[str, tuple[int, float]] = {}

    def error(self, topic: str, partition: int, now_s: float) -> RdKafkaError | None:
        """None when a record for ``topic`` (``partition``; -1 any) can be produced."""
        known = self._partitions.get(topic)
        if known is None or known[1] < now_s:
            known = (self._count(topic), now_s + self._ttl_s)
            self._partitions[topic] = known
        count = known[0]
        if count < 0:
            return None  # metadata unavailable: let the produce find out
        if count == 0:
            return RdKafkaError(RdKafkaError.UNKNOWN_TOPIC_OR_PART, f"topic {topic!r} not found")
        if partition >= count:
            return RdKafkaError(
                RdKafkaError._UNKNOWN_PARTITION,
                f"topic {topic!r} has {count} partitions, not {partition + 1}",
            )
        return None

    def _count(self, topic: str) -> int:
        """The topic's partition count; 0 when it does not exist; -1 when unknown."""
        started = time.monotonic()
        try:
            found = self._list_topics(topic, 5.0).topics.get(topic)
        except KafkaException as exc:
            log.warning("metadata of %r unavailable: %s", topic, exc)
            return -1
        if found is None:
            return 0
        error = getattr(found, "error", None)
        if error is not None:
            if error.code() == RdKafkaError.UNKNOWN_TOPIC_OR_PART:
                return 0
            log.warning("metadata of %r: %s", topic, error)
            return -1
        took = time.monotonic() - started
        if took > 0.5:
            log.info("metadata of %r took %.2f s", topic, took)
        return len(found.partitions)


class ExactlyOnceGuard:
    """What delivery asks before producing a record in exactly-once mode."""

    def __init__(self, poisoned: Poisoned, targets: TargetCheck) -> None:
        self.poisoned = poisoned
        self.targets = targets

    def remember(
        self,
        part: tuple[str, int],
        rec: TimerRecord,
        dead_letter: bool,
        err: RdKafkaError,
        shrink: int,
    ) -> None:
        """``rec`` failed in the open (now doomed) transaction."""
        self.poisoned.remember(_key(part, rec, dead_letter), err, shrink)

    def before_produce(
        self,
        part: tuple[str, int],
        rec: TimerRecord,
        dead_letter: bool,
        now_s: float | None = None,
    ) -> tuple[RdKafkaError, int] | None:
        """The error (and shrink step) to judge ``rec`` by instead of producing it, or
        None: produce it. A dead letter is checked against the memory only."""
        if self.poisoned:
            remembered = self.poisoned.take(_key(part, rec, dead_letter))
            if remembered is not None:
                return remembered
        if dead_letter:
            return None
        now = time.monotonic() if now_s is None else now_s
        err = self.targets.error(rec.target_topic, rec.target_partition, now)
        return None if err is None else (err, 0)


def _key(part: tuple[str, int], rec: TimerRecord, dead_letter: bool) -> tuple[object, ...]:
    return (part, rec.source_offset, generation_of(rec), dead_letter)
