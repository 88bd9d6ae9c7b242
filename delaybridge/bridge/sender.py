"""Producing delayed messages and cancels, as any producer would (native headers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaException, Producer

from delaybridge.bridge.headers import (
    DELAY_CANCEL,
    DELAY_ID,
    DELAY_MS,
    DELIVER_AT,
    TARGET_TOPIC,
)
from delaybridge.bridge.timing import TimeFormatError, parse_duration_ms, parse_rfc3339_ms
from delaybridge.errors import DelayBridgeError, KafkaError


def _produce_one(
    bootstrap: str,
    topic: str,
    value: bytes | None,
    key: bytes | None,
    headers: list[tuple[str, str | bytes | None]],
    timeout_s: float = 30.0,
) -> str:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "message.timeout.ms": int(timeout_s * 1000),
        }
    )
    result: dict[str, Any] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        result["err"] = err
        result["msg"] = msg

    try:
        producer.produce(topic, value, key, headers=headers, on_delivery=on_delivery)
    except KafkaException as exc:
        raise KafkaError(f"produce to {topic!r} at {bootstrap}: {exc}") from exc
    remaining = producer.flush(timeout_s)
    if remaining or "err" not in result:
        raise KafkaError(
            f"produce to {topic!r} at {bootstrap}: no acknowledgement in {timeout_s} s"
        )
    if result["err"] is not None:
        raise KafkaError(f"produce to {topic!r}: {result['err'].str()}", result["err"].name())
    msg = result["msg"]
    return f"{msg.topic()}/{msg.partition()}/{msg.offset()}"


def send_delayed(
    bootstrap: str,
    delay_topic: str,
    target_topic: str,
    value: bytes | None,
    *,
    key: bytes | None = None,
    delay: str | None = None,
    at: str | None = None,
    id: str | None = None,
    extra_headers: Sequence[tuple[str, str]] = (),
) -> str:
    """Produce one delayed message; returns ``topic/partition/offset``."""
    headers: list[tuple[str, str | bytes | None]] = [(TARGET_TOPIC, target_topic)]
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
    return _produce_one(bootstrap, delay_topic, value, key, headers)


def send_cancel(
    bootstrap: str, delay_topic: str, id: str, *, target_topic: str | None = None
) -> str:
    """Produce a cancel for ``id``; any partition of the delay topic will do."""
    headers: list[tuple[str, str | bytes | None]] = [(DELAY_CANCEL, id)]
    if target_topic:
        headers.append((TARGET_TOPIC, target_topic))
    return _produce_one(bootstrap, delay_topic, b"", id.encode(), headers)
