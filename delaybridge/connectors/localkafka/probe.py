"""Is the broker *really* usable? Ports, and a produce + consume round trip.

An open port only says the JVM bound a socket; a KRaft broker accepts
connections seconds before it has a controller, metadata and a working
``__consumer_offsets`` path. :func:`round_trip` is the real test: create a
topic, produce a unique record, read it back. Every call has a deadline, and a
Kafka failure raises :class:`~delaybridge.errors.KafkaError` with the
librdkafka error name as its code, never a hang.
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from typing import Any

from delaybridge.connectors.clients import KafkaClients
from delaybridge.connectors.errors import KafkaClientError, from_error
from delaybridge.connectors.produce import produce_and_wait
from delaybridge.connectors.settings import KafkaSettings
from delaybridge.connectors.topics import ensure_topics
from delaybridge.errors import KafkaError

_log = logging.getLogger(__name__)


def port_accepts(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """Does something accept TCP connections on ``host:port``?"""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def port_free(host: str, port: int) -> bool:
    """Could a server bind ``host:port`` now (as the JVM will, with SO_REUSEADDR)?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _clients(bootstrap: str) -> KafkaClients:
    return KafkaClients(KafkaSettings(bootstrap_servers=bootstrap))


def _quick(timeout_s: float) -> dict[str, Any]:
    """Overrides for a probe: short socket timeouts, librdkafka's complaints at DEBUG."""
    timeout_ms = max(1000, int(timeout_s * 1000))
    return {
        "socket.timeout.ms": timeout_ms,
        "socket.connection.setup.timeout.ms": timeout_ms,
        "logger": _DebugLogger(),
    }


class _DebugLogger:
    """librdkafka's log lines, demoted to DEBUG.

    By default librdkafka prints errors such as "connection refused" to stderr;
    a probe of a starting (or deliberately killed) broker expects them, and
    reports what matters through the KafkaError it raises.
    """

    def log(self, level: int, msg: str, *args: object) -> None:
        del level
        _log.debug(msg, *args)


def ensure_topic(bootstrap: str, topic: str, timeout_s: float) -> None:
    """Create ``topic`` (1 partition) unless it exists."""
    admin = _clients(bootstrap).admin(_quick(timeout_s))
    try:
        ensure_topics(admin, {topic: {}}, partitions=1, timeout_s=timeout_s)
    except KafkaClientError as exc:
        raise exc.context(f"at {bootstrap}") from exc


def produce(bootstrap: str, topic: str, value: bytes, timeout_s: float) -> tuple[int, int]:
    """Produce one record (acks=all) and wait for it; return (partition, offset).

    Raises :class:`KafkaError` within about ``timeout_s`` if the broker does
    not acknowledge, e.g. ``_MSG_TIMED_OUT`` when it is down.
    """
    producer = _clients(bootstrap).producer(
        _quick(timeout_s) | {"message.timeout.ms": max(1000, int(timeout_s * 1000))}
    )
    try:
        ref = produce_and_wait(producer, topic, value, timeout_s=timeout_s + 1.0)
    except KafkaClientError as exc:
        raise exc.context(f"at {bootstrap}") from exc
    return ref.partition, ref.offset


def consume_at(
    bootstrap: str, topic: str, partition: int, offset: int, timeout_s: float
) -> bytes | None:
    """The value of the record at ``topic/partition/offset``, read without a group."""
    from confluent_kafka import TopicPartition

    consumer = _clients(bootstrap).reader(_quick(timeout_s))
    where = f"consume {topic}/{partition}/{offset} at {bootstrap}"
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + timeout_s
        while (left_s := deadline - time.monotonic()) > 0:
            msg = consumer.poll(min(left_s, 1.0))
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                raise from_error(error, where)
            value: bytes | None = msg.value()
            return value
        raise KafkaError(f"{where}: nothing within {timeout_s:.1f} s", "_TIMED_OUT")
    finally:
        consumer.close()


def round_trip(bootstrap: str, topic: str, timeout_s: float) -> None:
    """Produce a unique record to ``topic`` and read the same bytes back."""
    ensure_topic(bootstrap, topic, timeout_s)
    payload = f"probe-{uuid.uuid4()}".encode()
    partition, offset = produce(bootstrap, topic, payload, timeout_s)
    got = consume_at(bootstrap, topic, partition, offset, timeout_s)
    if got != payload:
        raise KafkaError(
            f"round trip through {topic}/{partition}/{offset} at {bootstrap}: "
            f"wrote {payload!r}, read {got!r}",
            "_MISMATCH",
        )
