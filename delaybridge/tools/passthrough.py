"""A passthrough forwarder: consume a topic, produce every record to another. No store.

This is the ceiling the sidecar's end-to-end benchmark compares against (issue 4:
throughput ≥ 0.7 × passthrough). To be a fair ceiling it talks to Kafka exactly as the
sidecar does — the same client configuration (``connectors/clients.py``: idempotent
producer, ``acks=all``, murmur2 partitioner, ``read_committed`` cooperative-sticky
consumer; TLS and SASL from the same ``kafka.client``), the same way of producing
(``connectors/produce.py``), the same batch consume size, ``linger.ms``, compression
(lz4) and in-flight bound from :class:`DeliverySettings` — and forwards key, value and
headers unchanged. What it leaves out is precisely the sidecar's own work: header
parsing, the commit log, timer log and wheel, and waiting for the due time.

The clock starts at the first consumed record (so group join is not counted) and stops
at the last delivery acknowledgement (so records still in librdkafka's queue are not
counted as done).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException, Message, TopicPartition

from delaybridge.connectors import (
    KafkaClients,
    KafkaSettings,
    ProduceError,
    from_error,
    produce_blocking,
    wrap,
)
from delaybridge.errors import DelayBridgeError, KafkaError
from delaybridge.settings import DeliverySettings

#: Offsets are committed (asynchronously) this often, as the sidecar does after a flush.
COMMIT_INTERVAL_S = 0.2


@dataclass
class _Acks:
    """Delivery-report bookkeeping, updated from librdkafka's callback (same thread)."""

    acked: int = 0
    last_ack_s: float = 0.0
    error: ProduceError | None = None

    def on_delivery(self, err: RdKafkaError | None, msg: Message) -> None:
        if err is not None:
            if self.error is None:
                self.error = ProduceError(f"produce to {msg.topic()!r} failed: {err.str()}", err)
            return
        self.acked += 1
        self.last_ack_s = time.perf_counter()


def run_passthrough(
    kafka: KafkaSettings,
    source_topic: str,
    target_topic: str,
    n_messages: int,
    timeout_s: float,
    *,
    delivery: DeliverySettings | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Forward the first ``n_messages`` of ``source_topic`` to ``target_topic``; time it.

    ``kafka`` is the cluster, as the sidecar's ``kafka`` settings name it (``client``
    included); its group is replaced by a fresh one, so every run reads the source
    from the beginning. ``progress`` is called with the number acknowledged so far,
    a few times a second. Returns ``messages``, ``bytes`` (keys + values), ``seconds``,
    ``messages_per_s`` and ``mb_per_s``. Raises :class:`KafkaError` on a client or
    delivery error and :class:`DelayBridgeError` when ``timeout_s`` passes first,
    naming how far it got.
    """
    if n_messages <= 0:
        raise DelayBridgeError(f"passthrough: n_messages must be positive, not {n_messages}")
    settings = delivery or DeliverySettings()
    # A fresh group each run reads the source from the beginning (auto.offset.reset).
    clients = KafkaClients(
        kafka.model_copy(
            update={
                "group_id": f"delaybridge-passthrough-{uuid.uuid4().hex[:8]}",
                "instance_id": "",
            }
        )
    )
    consumer = clients.consumer({"fetch.wait.max.ms": 50})
    producer = clients.producer(
        {
            "linger.ms": settings.linger_ms,
            "compression.type": settings.compression_type,
            "queue.buffering.max.messages": max(100_000, 2 * settings.max_in_flight_records),
        },
    )
    acks = _Acks()
    forwarded = n_bytes = 0
    first_s: float | None = None
    positions: dict[int, int] = {}  # partition -> next offset to commit
    deadline = time.monotonic() + timeout_s
    next_commit = next_report = 0.0

    def check() -> None:
        if acks.error is not None:
            raise acks.error
        if time.monotonic() > deadline:
            raise DelayBridgeError(
                f"passthrough {source_topic} -> {target_topic} timed out after {timeout_s} s: "
                f"forwarded {forwarded}, acknowledged {acks.acked} of {n_messages}"
            )

    try:
        consumer.subscribe([source_topic])
        while forwarded < n_messages:
            check()
            batch = consumer.consume(min(settings.batch_max_records, n_messages - forwarded), 0.1)
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() == RdKafkaError._PARTITION_EOF:
                        continue
                    raise from_error(err, f"passthrough: consume {source_topic!r}")
                if first_s is None:
                    first_s = time.perf_counter()
                partition, offset = msg.partition(), msg.offset()
                if partition is None or offset is None:  # never for a fetched record
                    raise KafkaError(f"passthrough: record of {source_topic} has no offset")
                positions[partition] = offset + 1
                key, value = msg.key(), msg.value()
                # try_produce (what the sidecar's delivery calls) inside: only a full
                # queue waits, serving delivery reports (which is what frees it).
                produce_blocking(
                    producer,
                    target_topic,
                    value,
                    key,
                    headers=msg.headers(),
                    on_delivery=acks.on_delivery,
                    timeout_s=timeout_s,
                )
                forwarded += 1
                n_bytes += len(key or b"") + len(value or b"")
            # Bounded in-flight window, as the sidecar's Deliverer keeps.
            producer.poll(0)
            while forwarded - acks.acked > settings.max_in_flight_records:
                producer.poll(0.01)
                check()
            now = time.monotonic()
            if positions and now >= next_commit:
                consumer.commit(offsets=_offsets(source_topic, positions), asynchronous=True)
                next_commit = now + COMMIT_INTERVAL_S
            if progress is not None and now >= next_report:
                progress(acks.acked)
                next_report = now + 0.25
        while acks.acked < n_messages:
            producer.poll(0.05)
            check()
        consumer.commit(offsets=_offsets(source_topic, positions), asynchronous=False)
    except KafkaException as exc:
        raise wrap(exc, f"passthrough {source_topic} -> {target_topic}") from exc
    finally:
        consumer.close()
        producer.flush(5)
    if progress is not None:
        progress(acks.acked)
    assert first_s is not None  # n_messages > 0 records were consumed
    seconds = max(acks.last_ack_s - first_s, 1e-9)
    return {
        "source_topic": source_topic,
        "target_topic": target_topic,
        "messages": n_messages,
        "bytes": n_bytes,
        "seconds": seconds,
        "messages_per_s": n_messages / seconds,
        "mb_per_s": n_bytes / seconds / 1e6,
        "linger_ms": settings.linger_ms,
        "compression_type": settings.compression_type,
        "batch_max_records": settings.batch_max_records,
    }


def _offsets(topic: str, positions: dict[int, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p, offset) for p, offset in positions.items()]
