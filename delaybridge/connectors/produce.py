"""Producing a record: a full local queue handled once, errors wrapped once.

librdkafka's ``produce()`` only queues a record; the broker's answer comes later, to the
``on_delivery`` callback, from inside ``poll()`` or ``flush()``. ``produce()`` raises
``BufferError`` when the local queue is full (``queue.buffering.max.messages`` or
``.kbytes``) and ``KafkaException`` when the record can never be sent (unknown
partition, too large, a fatal producer error). Three ways to call it, by how long the
caller may wait:

* :func:`try_produce` — never waits: ``False`` means the queue is full, come back later
  (after serving delivery reports with ``poll(0)``, which is what frees the queue). The
  sidecar's delivery loop uses it, because it has other work to do meanwhile.
* :func:`produce_blocking` — waits for queue space up to a deadline; for bulk writers
  (benchmarks, the passthrough forwarder, seeding) that have nothing else to do.
* :func:`produce_and_wait` — one record, waits for its acknowledgement and returns
  where it landed; for ``delaybridge send``/``cancel``, the demo and the broker probe.

Each raises :class:`~delaybridge.connectors.errors.ProduceError` for a record the
producer refused or the broker did not take; its ``error`` is librdkafka's error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

from confluent_kafka import KafkaException

from delaybridge.connectors.edge import ProducerEdge
from delaybridge.connectors.errors import ProduceError, from_error, wrap

#: Pairs in order (repeats allowed), or a dict: what confluent-kafka takes (a list, not
#: any sequence; checking or converting per record would cost the hot path).
Headers = list[tuple[str, str | bytes | None]] | dict[str, str | bytes | None]
OnDelivery = Callable[[Any, Any], None]  # (confluent_kafka.KafkaError | None, Message)

#: Longest single wait in poll() while a blocking call waits; poll() returns sooner as
#: soon as it has served a delivery report (which is what frees queue space).
_POLL_S = 0.05
#: librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses.
_ANY_PARTITION = -1


class RecordRef(NamedTuple):
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"


def try_produce(
    producer: ProducerEdge,
    topic: str,
    value: bytes | str | None,
    key: bytes | str | None = None,
    *,
    partition: int | None = None,
    headers: Headers | None = None,
    on_delivery: OnDelivery | None = None,
    timestamp_ms: int | None = None,
) -> bool:
    """Queue one record; ``False`` when librdkafka's local queue is full.

    On ``False`` the producer has been polled once (``poll(0)``), so delivery reports
    already waiting have been served; the record is not queued and the caller retries
    later. ``partition`` None lets the partitioner choose; ``timestamp_ms`` None lets
    the producer stamp the record. Raises :class:`ProduceError` for a record librdkafka
    refuses (its ``error.code()`` says why).
    """
    try:
        if partition is None and timestamp_ms is None:  # the hot path: fewest arguments
            producer.produce(topic, value, key, on_delivery=on_delivery, headers=headers)
        else:
            producer.produce(
                topic,
                value,
                key,
                partition=_ANY_PARTITION if partition is None else partition,
                on_delivery=on_delivery,
                timestamp=0 if timestamp_ms is None else timestamp_ms,  # 0: stamp it now
                headers=headers,
            )
    except BufferError:
        producer.poll(0)
        return False
    except KafkaException as exc:
        raise wrap(exc, f"produce to {_where(topic, partition)}", ProduceError) from exc
    return True


def produce_blocking(
    producer: ProducerEdge,
    topic: str,
    value: bytes | str | None,
    key: bytes | str | None = None,
    *,
    partition: int | None = None,
    headers: Headers | None = None,
    on_delivery: OnDelivery | None = None,
    timestamp_ms: int | None = None,
    timeout_s: float = 60.0,
) -> None:
    """Queue one record, serving delivery reports until there is room (up to ``timeout_s``).

    Raises :class:`ProduceError` (code ``_QUEUE_FULL``) when the queue stays full that
    long, e.g. because the brokers are unreachable and nothing is acknowledged.
    """
    deadline: float | None = None  # set at the first full queue: the usual case reads no clock
    while not try_produce(
        producer,
        topic,
        value,
        key,
        partition=partition,
        headers=headers,
        on_delivery=on_delivery,
        timestamp_ms=timestamp_ms,
    ):
        now = time.monotonic()
        if deadline is None:
            deadline = now + timeout_s
        if now >= deadline:
            raise ProduceError(
                f"produce to {_where(topic, partition)}: the producer's queue stayed full "
                f"for {timeout_s} s (nothing acknowledged: are the brokers reachable?)",
                code="_QUEUE_FULL",
            )
        producer.poll(min(deadline - now, _POLL_S))


def produce_and_wait(
    producer: ProducerEdge,
    topic: str,
    value: bytes | str | None,
    key: bytes | str | None = None,
    *,
    partition: int | None = None,
    headers: Headers | None = None,
    timestamp_ms: int | None = None,
    timeout_s: float = 30.0,
) -> RecordRef:
    """Produce one record and wait for the broker's acknowledgement; where it landed.

    Raises :class:`ProduceError` with librdkafka's error when delivery fails (e.g.
    ``_MSG_TIMED_OUT`` when the brokers are down), or with code ``_TIMED_OUT`` when no
    delivery report came within ``timeout_s`` (the record may still be delivered later:
    give the producer a ``message.timeout.ms`` no longer than ``timeout_s`` to rule it
    out). Other records of the same producer are delivered meanwhile, not awaited.
    """
    reports: list[tuple[Any, Any]] = []
    deadline = time.monotonic() + timeout_s
    produce_blocking(
        producer,
        topic,
        value,
        key,
        partition=partition,
        headers=headers,
        on_delivery=lambda err, msg: reports.append((err, msg)),
        timestamp_ms=timestamp_ms,
        timeout_s=timeout_s,
    )
    while not reports:
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            raise ProduceError(
                f"produce to {_where(topic, partition)}: no acknowledgement within {timeout_s} s",
                code="_TIMED_OUT",
            )
        producer.poll(min(left_s, _POLL_S))
    err, msg = reports[0]
    if err is not None:
        raise from_error(err, f"produce to {_where(topic, partition)}", ProduceError)
    return RecordRef(msg.topic(), msg.partition(), msg.offset())


def _where(topic: str, partition: int | None) -> str:
    return repr(topic) if partition is None else f"{topic!r} partition {partition}"
