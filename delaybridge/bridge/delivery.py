"""Due messages out: take bounded batches from the stores, produce, account for acks.

Per turn, :meth:`Deliverer.pump` asks each partition's store for due records while the
number in flight stays under ``max_in_flight_records`` and produces them in the order
the store gives (due tick, then arrival: FIFO per source partition within a tick). A
million messages due in one tick therefore stream out in bounded batches at producer
speed, never all in memory.

Outcomes of one produced record (delivery callback, on the owner thread):

1. acked → counted, lateness observed, its batch moves toward ``commit_delivered``;
2. the target topic or partition does not exist → retried with exponential backoff
   until ``missing_topic_retry_ms`` after the first failure, then dead-lettered;
3. too large for the target, or any other permanent error → dead-lettered at once;
4. the dead-letter produce itself fails → retried with backoff until it succeeds
   (nothing is dropped; the delivery cursor waits, so a restart repeats it).

A record counts as resolved for its batch only once acked here or in the dead-letter
topic.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException, Producer

from delaybridge.bridge.deadletter import dead_letter_headers
from delaybridge.bridge.headers import delivered_headers
from delaybridge.bridge.partition import Batch, PartitionState
from delaybridge.bridge.ratelimit import RateLimits
from delaybridge.bridge.reasons import Reason
from delaybridge.bridge.settings import DeliverySettings
from delaybridge.timerlog import Clock, DueRecord

log = logging.getLogger(__name__)

_MISSING = {
    RdKafkaError._UNKNOWN_TOPIC: Reason.TARGET_TOPIC_MISSING,
    RdKafkaError.UNKNOWN_TOPIC_OR_PART: Reason.TARGET_TOPIC_MISSING,
    RdKafkaError._UNKNOWN_PARTITION: Reason.TARGET_PARTITION_MISSING,
}
_TOO_LARGE = {RdKafkaError.MSG_SIZE_TOO_LARGE, RdKafkaError.RECORD_LIST_TOO_LARGE}
_BACKOFF_MIN_MS = 500
_BACKOFF_MAX_MS = 30_000


@dataclass(order=True)
class _Retry:
    at_ms: int
    seq: int
    due: DueRecord = field(compare=False)
    batch: Batch = field(compare=False)
    part: PartitionState = field(compare=False)
    first_failure_ms: int = field(compare=False)
    attempts: int = field(compare=False)
    dead_letter: tuple[Reason, str] | None = field(compare=False, default=None)


@dataclass
class DeliveryCounters:
    """Counts since the last :meth:`Deliverer.drain_counters` (for metrics, per turn)."""

    delivered: dict[str, int] = field(default_factory=dict)
    dead_lettered: dict[Reason, int] = field(default_factory=dict)
    retries: dict[Reason, int] = field(default_factory=dict)
    lateness_ms: list[int] = field(default_factory=list)
    early: int = 0


class Deliverer:
    """Produces due records for every partition; one owner thread."""

    def __init__(
        self,
        producer: Producer,
        settings: DeliverySettings,
        dead_letter_topic: str,
        clock: Clock,
    ) -> None:
        self._producer = producer
        self._settings = settings
        self._dlt = dead_letter_topic
        self._clock = clock
        self._limits = RateLimits(settings.rate_limits_per_s, time.monotonic())
        self._retries: list[_Retry] = []
        self._seq = itertools.count()
        self.in_flight = 0
        self.counters = DeliveryCounters()

    # -- the turn ---------------------------------------------------------------------

    def pump(self, parts: Iterable[PartitionState]) -> int:
        """Produce what is due, within the in-flight bound. Returns records produced."""
        produced = self._run_retries()
        limit = self._settings.max_in_flight_records
        for part in parts:
            while self.in_flight < limit:
                if not part.held:
                    taken = part.store.take_due(
                        min(self._settings.batch_max_records, limit - self.in_flight)
                    )
                    if not taken:
                        break
                    batch = Batch(taken[-1].cursor, len(taken))
                    part.batches.append(batch)
                    part.held.extend((due, batch) for due in taken)
                produced += self._produce_held(part)
                if part.held:
                    break  # queue full or rate limited: the rest waits for the next turn
        return produced

    def _produce_held(self, part: PartitionState) -> int:
        """The hot path: produce ``part.held`` in order until done or blocked."""
        held = part.held
        produce = self._producer.produce
        limits = self._limits
        lateness = self.counters.lateness_ms
        prefix = part.origin_prefix
        on_ack = self._on_ack
        now_ms = self._clock.now_ms()
        now_s = time.monotonic()
        done = 0
        while held:
            due, batch = held[0]
            rec = due.record
            if limits and not limits.allow(rec.target_topic, now_s):
                break
            if now_ms < rec.due_ms:  # the store must never hand out early records
                self.counters.early += 1
                log.error(
                    "store handed out %s %d ms early; holding it", rec.id, rec.due_ms - now_ms
                )
                break
            headers = delivered_headers(
                rec.headers, rec.id, prefix + str(rec.source_offset), rec.due_ms
            )
            try:
                # A failed delivery report carries no headers: the callback keeps the record.
                on_delivery = partial(on_ack, part, batch, due)
                if rec.target_partition >= 0:
                    produce(
                        rec.target_topic,
                        rec.value,
                        rec.key,
                        rec.target_partition,
                        on_delivery=on_delivery,
                        headers=headers,
                    )
                else:
                    produce(
                        rec.target_topic,
                        rec.value,
                        rec.key,
                        on_delivery=on_delivery,
                        headers=headers,
                    )
            except BufferError:
                self._producer.poll(0)
                break
            except KafkaException as exc:  # refused before sending (too large, ...)
                self._failed(part, due, batch, exc.args[0], now_ms, 1)
            else:
                self.in_flight += 1
                # The record's timestamp (CreateTime) is now: what its consumers will see.
                lateness.append(now_ms - rec.due_ms)
            held.popleft()
            done += 1
        return done

    def _on_ack(
        self,
        part: PartitionState,
        batch: Batch,
        due: DueRecord,
        err: RdKafkaError | None,
        msg: Any,
    ) -> None:
        """Delivery report of a record produced by :meth:`_produce_held`."""
        self.in_flight -= 1
        if err is None:
            topic_counts = self.counters.delivered
            topic = due.record.target_topic
            topic_counts[topic] = topic_counts.get(topic, 0) + 1
            part.resolve(batch)
        else:
            self._failed(part, due, batch, err, self._clock.now_ms(), 1)

    def next_retry_ms(self) -> int | None:
        return self._retries[0].at_ms if self._retries else None

    def drain_counters(self) -> DeliveryCounters:
        counters, self.counters = self.counters, DeliveryCounters()
        return counters

    # -- producing --------------------------------------------------------------------

    def _send(
        self,
        part: PartitionState,
        due: DueRecord,
        batch: Batch,
        first_try_ms: int,
        attempts: int,
    ) -> bool:
        """Produce one due record; False when the producer queue is full (try later)."""
        rec = due.record
        origin = part.origin_prefix + str(rec.source_offset)
        kwargs: dict[str, Any] = {}
        if rec.target_partition >= 0:
            kwargs["partition"] = rec.target_partition

        def on_delivery(err: RdKafkaError | None, msg: Any) -> None:
            if msg is not None:
                self.in_flight -= 1
            if err is None:
                counts = self.counters.delivered
                counts[rec.target_topic] = counts.get(rec.target_topic, 0) + 1
                part.resolve(batch)
            else:
                self._failed(part, due, batch, err, first_try_ms, attempts + 1)

        try:
            self._producer.produce(
                rec.target_topic,
                rec.value,
                rec.key,
                headers=delivered_headers(rec.headers, rec.id, origin, rec.due_ms),
                on_delivery=on_delivery,
                **kwargs,
            )
        except BufferError:
            self._producer.poll(0)
            return False
        except KafkaException as exc:
            on_delivery(exc.args[0], None)  # same path as a failed ack (too large, ...)
            return True
        self.in_flight += 1
        return True

    def _failed(
        self,
        part: PartitionState,
        due: DueRecord,
        batch: Batch,
        err: RdKafkaError,
        first_try_ms: int,
        attempts: int,
    ) -> None:
        code = err.code()
        now_ms = self._clock.now_ms()
        rec = due.record
        where = f"topic {rec.target_topic!r}"
        if rec.target_partition >= 0:
            where += f" partition {rec.target_partition}"
        if code in _MISSING:
            reason = _MISSING[code]
            if now_ms - first_try_ms < self._settings.missing_topic_retry_ms:
                self.counters.retries[reason] = self.counters.retries.get(reason, 0) + 1
                self._retry_later(part, due, batch, first_try_ms, attempts)
                return
            detail = f"{where} missing for {now_ms - first_try_ms} ms: {err.str()}"
        elif code in _TOO_LARGE:
            reason, detail = Reason.RECORD_TOO_LARGE, f"{where}: {err.str()}"
        else:
            reason, detail = Reason.DELIVERY_FAILED, f"{where}: {err.str()} [{err.name()}]"
        self._dead_letter(part, due, batch, reason, detail)

    def _dead_letter(
        self,
        part: PartitionState,
        due: DueRecord,
        batch: Batch,
        reason: Reason,
        detail: str,
        attempts: int = 0,
    ) -> None:
        rec = due.record
        origin = part.origin_prefix + str(rec.source_offset)
        headers = dead_letter_headers(
            delivered_headers(rec.headers, rec.id, origin, rec.due_ms), reason, detail, origin
        )

        def on_dlt(err: RdKafkaError | None, msg: Any) -> None:
            if msg is not None:
                self.in_flight -= 1
            if err is None:
                self.counters.dead_lettered[reason] = self.counters.dead_lettered.get(reason, 0) + 1
                part.resolve(batch)
                return
            log.error("dead-letter topic %r refused %s: %s; retrying", self._dlt, rec.id, err.str())
            self._retry_later(part, due, batch, 0, attempts + 1, (reason, detail))

        try:
            self._producer.produce(
                self._dlt, rec.value, rec.key, headers=headers, on_delivery=on_dlt
            )
            self.in_flight += 1
        except (BufferError, KafkaException) as exc:
            log.error("cannot dead-letter %s to %r now: %s; retrying", rec.id, self._dlt, exc)
            self._retry_later(part, due, batch, 0, attempts + 1, (reason, detail))

    def _retry_later(
        self,
        part: PartitionState,
        due: DueRecord,
        batch: Batch,
        first_failure_ms: int,
        attempts: int,
        dead_letter: tuple[Reason, str] | None = None,
    ) -> None:
        """Try again after an exponential backoff (0.5 s doubling to 30 s)."""
        backoff = min(_BACKOFF_MAX_MS, _BACKOFF_MIN_MS * 2 ** min(attempts, 10))
        retry = _Retry(
            self._clock.now_ms() + backoff, next(self._seq), due, batch, part,
            first_failure_ms, attempts, dead_letter,
        )  # fmt: skip
        heapq.heappush(self._retries, retry)

    def _run_retries(self) -> int:
        now_ms = self._clock.now_ms()
        done = 0
        while self._retries and self._retries[0].at_ms <= now_ms:
            retry = heapq.heappop(self._retries)
            if retry.part.closed:
                continue  # its partition moved away; the next owner delivers it
            if retry.dead_letter is not None:
                reason, detail = retry.dead_letter
                self._dead_letter(
                    retry.part, retry.due, retry.batch, reason, detail, retry.attempts
                )
            elif not self._send(
                retry.part, retry.due, retry.batch, retry.first_failure_ms, retry.attempts
            ):
                retry.at_ms = now_ms + _BACKOFF_MIN_MS
                heapq.heappush(self._retries, retry)
                break
            done += 1
        return done
