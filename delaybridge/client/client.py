"""The producer's API: schedule, cancel, reschedule, and retry_later for consumers.

A :class:`DelayClient` wraps one confluent-kafka producer and one delay topic. Each call
checks its typed arguments (``client/arguments.py``), builds the record in the header
contract (``client/records.py``, ``client/retry.py``), refuses what the sidecar would
dead-letter (the sidecar's own classifier, run here), produces it and **waits for
Kafka's acknowledgement** (``acks=all``): when a call returns, the record is in the
delay topic and the sidecar will act on it; when it raises
:class:`~delaybridge.connectors.ProduceError`, nothing was acknowledged (with a producer
whose ``message.timeout.ms`` is at most the client's timeout, as :meth:`connect` builds
it, the record is then never written later either).

The one exception is :meth:`DelayClient.retry_later_in_transaction`, for a consumer that
reads and writes in one Kafka transaction: it only queues the record on the caller's
transactional producer; the caller's ``commit_transaction`` makes it and the consumed
offsets visible together (or neither), so it must not wait for an acknowledgement of
its own.

Not thread-safe: one thread calls a client (librdkafka's producer is thread-safe, so
two clients may share one producer). Building a client makes no network call.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from confluent_kafka import Message

from delaybridge.client.arguments import HeadersArg, duration_ms, topic_name
from delaybridge.client.records import (
    OnDuplicate,
    Outgoing,
    When,
    cancel_prefix_record,
    cancel_record,
    checked,
    schedule_record,
)
from delaybridge.client.retry import RetryPolicy, retry_record
from delaybridge.connectors import KafkaClients, KafkaSettings, RecordRef
from delaybridge.connectors.edge import ProducerEdge
from delaybridge.connectors.produce import produce_and_wait, produce_blocking
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import DAY_MS, DEFAULT_DELAY_LEVELS


class DelayClient:
    """Scheduled messages and retries through one delay topic (see the module docstring).

    ``producer`` is any confluent-kafka ``Producer`` (idempotent with ``acks=all`` is
    what :meth:`connect` builds); ``max_delay`` is the sidecar's ``store.max_delay_ms``
    (a longer delay would be dead-lettered, so it is refused here); ``timeout`` bounds
    the wait for each acknowledgement. ``clock`` (epoch seconds) and ``uniform`` (the
    jitter's draw in [0, 1)) are injected so that tests are deterministic.
    """

    def __init__(
        self,
        producer: ProducerEdge,
        delay_topic: str,
        *,
        max_delay: timedelta = timedelta(milliseconds=365 * DAY_MS),
        timeout: timedelta = timedelta(seconds=30),
        clock: Callable[[], float] = time.time,
        uniform: Callable[[], float] = random.random,
    ) -> None:
        self.delay_topic = topic_name("delay_topic", delay_topic)
        self._producer = producer
        self._timeout_s = duration_ms("timeout", timeout, minimum_ms=1) / 1000
        self._rules = HeaderRules.from_strings(
            DEFAULT_DELAY_LEVELS,
            duration_ms("max_delay", max_delay, minimum_ms=1),
            delay_topics=[self.delay_topic],
        )
        self._clock = clock
        self._uniform = uniform
        self._owned = False

    @classmethod
    def connect(
        cls,
        kafka: KafkaSettings | str,
        delay_topic: str,
        *,
        timeout: timedelta = timedelta(seconds=30),
        producer_config: dict[str, Any] | None = None,
        **options: Any,
    ) -> DelayClient:
        """A client with its own producer for ``kafka`` (settings, or bootstrap servers):
        idempotent, ``acks=all``, the Java clients' partitioner, TLS/SASL from the
        settings, and ``message.timeout.ms`` equal to ``timeout`` so that a record not
        acknowledged in time is never written later. :meth:`close` flushes it.
        ``options`` are the constructor's (``max_delay``, ``clock``, ``uniform``)."""
        settings = KafkaSettings(bootstrap_servers=kafka) if isinstance(kafka, str) else kafka
        timeout_ms = duration_ms("timeout", timeout, minimum_ms=1)
        config = {"message.timeout.ms": timeout_ms, **(producer_config or {})}
        producer = KafkaClients(settings).producer(config)
        # The wait outlasts librdkafka's own timeout, so its verdict is the one we see.
        client = cls(producer, delay_topic, timeout=timeout + timedelta(seconds=1), **options)
        client._owned = True
        return client

    def __enter__(self) -> DelayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout: timedelta = timedelta(seconds=10)) -> None:
        """Flush a producer :meth:`connect` built; a producer the caller passed is theirs."""
        if self._owned:
            self._producer.flush(timeout.total_seconds())

    # -- producers' calls -------------------------------------------------------------------

    def schedule(
        self,
        target: str,
        value: bytes | str | None,
        *,
        key: bytes | str | None = None,
        headers: HeadersArg | None = None,
        delay: timedelta | None = None,
        at: datetime | None = None,
        cron: str | None = None,
        tz: str | None = None,
        every: timedelta | None = None,
        until: datetime | None = None,
        count: int | None = None,
        jitter: timedelta | None = None,
        id: str | None = None,
        on_duplicate: OnDuplicate | None = None,
        partition: int | None = None,
    ) -> RecordRef:
        """Deliver ``value`` (with ``key`` and ``headers``) to ``target`` later; where the
        delay-topic record landed, once Kafka acknowledged it.

        When: ``delay`` (from now: the record's timestamp) or ``at`` (an aware datetime);
        or a series, ``cron`` (5 fields or ``@daily``...; in ``tz``, an IANA zone, default
        UTC) or ``every`` (at least 1 s), ending at ``until`` (inclusive) or after
        ``count`` occurrences; with ``delay``/``at`` as well, that is the first
        occurrence. ``jitter``: a one-off is due up to this long after that time, by a
        hash of its id (``delay-jitter``: never earlier, the same on a replay). ``id``:
        for cancel and reschedule (default: the record's coordinates); a pending
        message with the same id and target is replaced unless ``on_duplicate="keep"``.
        ``partition``: the target partition (default: the key decides, as a Java
        producer's would). Raises :class:`ClientArgumentError` naming the argument at
        fault.
        """
        when = When(delay, at, cron, tz, every, until, count, jitter)
        return self._schedule(target, value, when, key, headers, id, on_duplicate, partition)

    def reschedule(
        self,
        id: str,
        target: str,
        value: bytes | str | None,
        *,
        key: bytes | str | None = None,
        headers: HeadersArg | None = None,
        delay: timedelta | None = None,
        at: datetime | None = None,
        cron: str | None = None,
        tz: str | None = None,
        every: timedelta | None = None,
        until: datetime | None = None,
        count: int | None = None,
        jitter: timedelta | None = None,
        partition: int | None = None,
    ) -> RecordRef:
        """Move the pending message ``id`` bound for ``target``: a schedule with the same
        id that replaces it (``delay-on-duplicate: replace``), the latest sent winning,
        whichever delay-topic partition each record is in (DESIGN §2).

        The replacing record is the whole message: give its ``value`` (and ``key``,
        ``headers``) again, with the new time; the arguments are :meth:`schedule`'s. If
        the message was delivered already, this schedules it anew. A series is
        rescheduled the same way: the new series replaces it. The target must be the
        same: a replace only takes messages bound for its own target.
        """
        when = When(delay, at, cron, tz, every, until, count, jitter)
        return self._schedule(target, value, when, key, headers, id, "replace", partition)

    def cancel(self, id: str, *, target: str | None = None) -> RecordRef:
        """Cancel the pending messages with ``id`` sent before this call (and, with
        ``target``, bound for that topic only); a series stops. A cancel of an id that is
        not pending (delivered already, or never sent) is harmless."""
        return self._send(cancel_record(self.delay_topic, id, target))

    def cancel_prefix(self, prefix: str, *, target: str | None = None) -> RecordRef:
        """Cancel every pending message whose id starts with ``prefix`` sent before this
        call (with ``target``, bound for that topic only): a tenant's or an order's whole
        family (``delay-cancel-prefix``). The prefix must not be blank. A replica that
        reads the record and holds more matching messages than its
        ``cancels.prefix_confirm_above`` dead-letters it as ``prefix-over-cap`` instead
        (a record cannot confirm): bulk-cancel more through the admin API."""
        return self._send(cancel_prefix_record(self.delay_topic, prefix, target))

    # -- consumers' calls -------------------------------------------------------------------

    def retry_later(
        self,
        message: Message,
        attempt: int | None,
        policy: RetryPolicy,
        *,
        error: BaseException | str | None = None,
    ) -> RecordRef:
        """Hand a consumed ``message`` back: another attempt after the policy's backoff,
        or, after the last attempt, the dead-letter topic (``client/retry.py``).

        ``attempt`` is the attempt that failed (1: the first delivery; None: read it from
        the policy's attempt header). ``error`` goes into the dead letter's detail.
        Returns once Kafka acknowledged the record, so the caller may commit the
        message's offset after it: the record is then never lost, and handed back at
        most twice if the process dies between the two (the second retry replaces the
        first while it is pending).
        """
        return self._send(self._retry(message, attempt, policy, error))

    def retry_later_in_transaction(
        self,
        message: Message,
        attempt: int | None,
        policy: RetryPolicy,
        *,
        error: BaseException | str | None = None,
    ) -> None:
        """:meth:`retry_later` inside the caller's Kafka transaction: the client's producer
        is the caller's transactional producer (``transactional.id``), between its
        ``begin_transaction`` and its ``send_offsets_to_transaction`` +
        ``commit_transaction``. The record is only queued here (no flush, no wait):
        commit makes it and the consumed offset visible together, abort drops both, and
        a delivery failure surfaces as the commit's error. The sidecar reads its delay
        topic ``read_committed``, so an aborted retry never comes back."""
        record = self._retry(message, attempt, policy, error)
        produce_blocking(
            self._producer,
            record.topic,
            record.value,
            record.key,
            headers=record.headers,
            timeout_s=self._timeout_s,
        )

    # -- the rest ---------------------------------------------------------------------------

    def _schedule(
        self,
        target: str,
        value: bytes | str | None,
        when: When,
        key: bytes | str | None,
        headers: HeadersArg | None,
        id: str | None,
        on_duplicate: OnDuplicate | None,
        partition: int | None,
    ) -> RecordRef:
        record = schedule_record(
            self.delay_topic,
            target,
            value,
            when,
            key=key,
            headers=headers,
            id=id,
            on_duplicate=on_duplicate,
            partition=partition,
        )
        checked(record, self._rules, self._now_ms())
        return self._send(record)

    def _retry(
        self,
        message: Message,
        attempt: int | None,
        policy: RetryPolicy,
        error: BaseException | str | None,
    ) -> Outgoing:
        text = None if error is None else str(error) or type(error).__name__
        record = retry_record(message, attempt, policy, self.delay_topic, self._uniform(), text)
        if record.topic == self.delay_topic:
            checked(record, self._rules, self._now_ms())
        return record

    def _send(self, record: Outgoing) -> RecordRef:
        return produce_and_wait(
            self._producer,
            record.topic,
            record.value,
            record.key,
            headers=record.headers,
            timeout_s=self._timeout_s,
        )

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)
