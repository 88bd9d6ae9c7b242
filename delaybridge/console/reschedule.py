"""Rescheduling a pending message: a replacing record on its delay topic.

The console does not move a message inside a store (no admin call does); it writes what
a producer would write to move it: a schedule with the **same** ``delay-id`` and the new
due time (``deliver-at-ms``), with the message's key, value, target and headers. The
sidecars' usual rule then applies (DESIGN §2): a schedule whose id is already pending
replaces it, the latest sent winning across partitions, so the old due time is dropped
by whichever replica owns it and the new record is stored by the owner of the partition
it lands in. Nothing about rescheduling is special inside the sidecar.

What is carried over, from the admin API's look-up (``values=true``):

- key and value as they were (the look-up shows bytes that are not UTF-8 as
  ``base64:...``, decoded back here);
- ``delay-target-topic`` and, if the message had one, ``delay-target-partition``;
- the producer's own headers as stored (the sidecar already stripped the control
  headers, and its internal ones are never copied).

Recurring messages are refused: a replacing one-shot record would end the series, which
is not what "move this message" means; cancel the series and send a new one instead.
"""

from __future__ import annotations

import base64
import threading
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

from delaybridge.connectors import KafkaClients, RecordRef, produce_and_wait
from delaybridge.contract.names import (
    CONTROL_HEADERS,
    DELAY_ID,
    DELIVER_AT_MS,
    INTERNAL_HEADERS,
    SERIES_HEADER,
    TARGET_PARTITION,
    TARGET_TOPIC,
)
from delaybridge.errors import DelayBridgeError

Headers = list[tuple[str, str | bytes | None]]


class CannotReschedule(DelayBridgeError):
    """The message cannot be moved by a replacing record (said why)."""


@dataclass(frozen=True)
class Replacement:
    """The record that moves a message: where it goes and what it carries."""

    delay_topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers


def raw(shown: str | None) -> bytes | None:
    """Key or header text as the admin API shows it, back to bytes."""
    if shown is None:
        return None
    if shown.startswith("base64:"):
        return base64.b64decode(shown[len("base64:") :])
    return shown.encode("utf-8")


def replacement(message: dict[str, Any], due_ms: int) -> Replacement:
    """The replacing record for ``message`` (a look-up with ``values=true``) due at ``due_ms``."""
    headers_in: dict[str, str | None] = message.get("headers") or {}
    if SERIES_HEADER in headers_in:
        raise CannotReschedule(
            f"{message['id']!r} is an occurrence of a recurring schedule: a replacing "
            "record would end the series; cancel it and send a new series instead"
        )
    if "value" not in message:
        raise CannotReschedule("the look-up did not include the value (values=true)")
    origin = str(message["origin"])  # <delay-topic>/<partition>/<offset>
    delay_topic = origin.rsplit("/", 2)[0]
    if origin.count("/") < 2 or not delay_topic:
        raise CannotReschedule(f"cannot tell the delay topic from origin {origin!r}")
    value = message["value"]
    headers: Headers = [
        (name, raw(text))
        for name, text in headers_in.items()
        if name not in CONTROL_HEADERS and name not in INTERNAL_HEADERS
    ]
    headers.append((TARGET_TOPIC, str(message["target_topic"])))
    partition = message.get("target_partition")
    if partition is not None and int(partition) >= 0:
        headers.append((TARGET_PARTITION, str(int(partition))))
    headers.append((DELIVER_AT_MS, str(due_ms)))
    headers.append((DELAY_ID, str(message["id"])))
    return Replacement(
        delay_topic=delay_topic,
        key=raw(message.get("key")),
        value=None if value is None else base64.b64decode(value),
        headers=headers,
    )


class Rescheduler:
    """Produces replacing records with the console's own producer (acks=all, idempotent)."""

    def __init__(self, clients: KafkaClients, timeout_s: float = 30.0) -> None:
        self._clients = clients
        self._timeout_s = timeout_s
        self._producer: Producer | None = None
        self._lock = threading.Lock()

    def send(self, record: Replacement) -> RecordRef:
        """Produce ``record`` and wait for Kafka's acknowledgement; where it landed."""
        with self._lock:
            return self._send(record)

    def _send(self, record: Replacement) -> RecordRef:
        if self._producer is None:
            # librdkafka gives up on the record when we stop waiting, so a timed-out
            # reschedule is never applied later behind the operator's back.
            timeout_ms = int(self._timeout_s * 1000)
            self._producer = self._clients.producer({"message.timeout.ms": timeout_ms})
        return produce_and_wait(
            self._producer,
            record.delay_topic,
            record.value,
            record.key,
            headers=record.headers,
            timeout_s=self._timeout_s + 1,
        )

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.flush(5)
                self._producer = None
