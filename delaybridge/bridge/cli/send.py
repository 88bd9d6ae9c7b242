"""Producing delayed messages and cancels, as any producer would (native headers)."""

from __future__ import annotations

from collections.abc import Sequence

from delaybridge.connectors import KafkaClients, KafkaSettings, RecordRef, produce_and_wait
from delaybridge.contract.names import (
    DELAY_CANCEL,
    DELAY_ID,
    DELAY_MS,
    DELIVER_AT,
    TARGET_TOPIC,
)
from delaybridge.contract.timing import TimeFormatError, parse_duration_ms, parse_rfc3339_ms
from delaybridge.errors import DelayBridgeError

Headers = list[tuple[str, str | bytes | None]]


def _produce_one(
    kafka: KafkaSettings,
    topic: str,
    value: bytes | None,
    key: bytes | None,
    headers: Headers,
    timeout_s: float = 30.0,
) -> RecordRef:
    # librdkafka gives up on the record when we do, so a timeout never delivers it late.
    producer = KafkaClients(kafka).producer({"message.timeout.ms": int(timeout_s * 1000)})
    return produce_and_wait(producer, topic, value, key, headers=headers, timeout_s=timeout_s + 1)


def send_delayed(
    kafka: KafkaSettings,
    delay_topic: str,
    target_topic: str,
    value: bytes | None,
    *,
    key: bytes | None = None,
    delay: str | None = None,
    at: str | None = None,
    id: str | None = None,
    extra_headers: Sequence[tuple[str, str]] = (),
) -> RecordRef:
    """Produce one delayed message (the cluster's client settings apply); where it landed."""
    headers: Headers = [(TARGET_TOPIC, target_topic)]
    try:
        if delay is not None:
            headers.append((DELAY_MS, str(parse_duration_ms(delay))))
        elif at is not None:
            parse_rfc3339_ms(at)  # fail here, not in the dead-letter topic
            headers.append((DELIVER_AT, at))
        else:
            raise DelayBridgeError("give a delay or an absolute time")
    except TimeFormatError as exc:
        raise DelayBridgeError(str(exc)) from exc
    if id is not None:
        headers.append((DELAY_ID, id))
    headers.extend(extra_headers)
    return _produce_one(kafka, delay_topic, value, key, headers)


def send_cancel(
    kafka: KafkaSettings, delay_topic: str, id: str, *, target_topic: str | None = None
) -> RecordRef:
    """Produce a cancel for ``id``; any partition of the delay topic will do."""
    headers: Headers = [(DELAY_CANCEL, id)]
    if target_topic:
        headers.append((TARGET_TOPIC, target_topic))
    return _produce_one(kafka, delay_topic, b"", id.encode(), headers)
