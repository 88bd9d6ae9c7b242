"""Thin typed edges over confluent-kafka: configs from settings, errors wrapped with codes.

Nothing here makes a network call in a constructor's caller's back: building a client
only builds the librdkafka handle. The librdkafka configuration is derived from
:class:`~delaybridge.bridge.settings.KafkaSettings` in one place, so the sidecar, the CLI
and the benchmarks talk to Kafka the same way (security settings pass through).
"""

from __future__ import annotations

import logging
from typing import Any, cast

from confluent_kafka import Consumer, KafkaException, Message, Producer
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from delaybridge.bridge.settings import KafkaSettings
from delaybridge.errors import KafkaError

log = logging.getLogger(__name__)


def base_config(kafka: KafkaSettings) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": kafka.bootstrap_servers}
    conf.update(kafka.client)
    return conf


def consumer_config(kafka: KafkaSettings, **extra: Any) -> dict[str, Any]:
    conf = base_config(kafka)
    conf.update(
        {
            "group.id": kafka.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": kafka.session_timeout_ms,
            "socket.timeout.ms": kafka.request_timeout_ms,
        }
    )
    if kafka.instance_id:
        conf["group.instance.id"] = kafka.instance_id
    conf.update(extra)
    return conf


def producer_config(kafka: KafkaSettings, **extra: Any) -> dict[str, Any]:
    conf = base_config(kafka)
    conf.update(
        {
            "enable.idempotence": True,
            "acks": "all",
            # Java clients' partitioner, so a keyed message lands where a Java producer's would.
            "partitioner": "murmur2_random",
            "request.timeout.ms": kafka.request_timeout_ms,
        }
    )
    conf.update(extra)
    return conf


def make_consumer(kafka: KafkaSettings, **extra: Any) -> Consumer:
    return Consumer(consumer_config(kafka, **extra), logger=log)


def make_producer(kafka: KafkaSettings, **extra: Any) -> Producer:
    return Producer(producer_config(kafka, **extra), logger=log)


def make_admin(kafka: KafkaSettings) -> AdminClient:
    return AdminClient(base_config(kafka))


def wrap(exc: KafkaException, what: str) -> KafkaError:
    """A librdkafka exception as our error, naming the operation and keeping the code."""
    err = exc.args[0] if exc.args else None
    if isinstance(err, RdKafkaError):
        return KafkaError(f"{what}: {err.str()}", err.name())
    return KafkaError(f"{what}: {exc}")


def ensure_topics(
    admin: AdminClient,
    topics: dict[str, dict[str, str]],
    *,
    partitions: int = 1,
    timeout_s: float = 30.0,
) -> None:
    """Create the topics that do not exist yet (``name -> topic config``)."""
    metadata = admin.list_topics(timeout=timeout_s)
    missing = [
        NewTopic(name, num_partitions=partitions, config=conf)
        for name, conf in topics.items()
        if name not in metadata.topics
    ]
    if not missing:
        return
    futures = admin.create_topics(missing, operation_timeout=timeout_s, request_timeout=timeout_s)
    for name, future in futures.items():
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, RdKafkaError) and err.code() == RdKafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise wrap(exc, f"create topic {name!r}") from exc


def headers_of(msg: Message) -> list[tuple[str, bytes | None]]:
    """A consumed record's headers, in order (librdkafka gives a list of pairs)."""
    return cast(list[tuple[str, bytes | None]], msg.headers() or [])


def header_text(msg: Message) -> dict[str, str]:
    """A consumed record's headers as text (last one wins; undecodable bytes replaced)."""
    return {name: (raw or b"").decode("utf-8", "replace") for name, raw in headers_of(msg)}
