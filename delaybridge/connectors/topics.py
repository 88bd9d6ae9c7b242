"""Creating the topics a component needs, idempotently."""

from __future__ import annotations

import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException
from confluent_kafka.cimpl import NewTopic

from delaybridge.connectors.edge import AdminEdge
from delaybridge.connectors.errors import KafkaClientError, wrap


def ensure_topics(
    admin: AdminEdge,
    topics: dict[str, dict[str, str]],
    *,
    partitions: int = 1,
    replication_factor: int = -1,
    timeout_s: float = 30.0,
) -> None:
    """Create the topics that do not exist yet (``name -> topic config``).

    A topic another process created meanwhile is fine; any other failure raises
    :class:`~delaybridge.connectors.errors.KafkaClientError` naming the topic (code
    ``_TIMED_OUT`` when the brokers do not answer within ``timeout_s``).
    """
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise wrap(exc, f"list topics (to create {sorted(topics)})") from exc
    missing = [
        NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication_factor,  # -1: the broker's default
            config=conf,
        )
        for name, conf in topics.items()
        if name not in metadata.topics
    ]
    if not missing:
        return
    futures = admin.create_topics(missing, operation_timeout=timeout_s, request_timeout=timeout_s)
    _await_created(futures, timeout_s)
    _await_leaders(admin, [t.topic for t in missing], timeout_s)


def _await_created(futures: dict[str, Any], timeout_s: float) -> None:
    for name, future in futures.items():
        try:
            future.result(timeout=timeout_s)
        except FutureTimeout as exc:
            raise KafkaClientError(
                f"create topic {name!r}: no answer within {timeout_s} s", code="_TIMED_OUT"
            ) from exc
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, RdKafkaError) and err.code() == RdKafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise wrap(exc, f"create topic {name!r}") from exc


def _await_leaders(admin: AdminEdge, names: list[str], timeout_s: float) -> None:
    """Wait until every partition of the new topics has a leader: a topic created a
    moment ago answers NOT_LEADER_FOR_PARTITION to offset requests until then."""
    deadline = time.monotonic() + timeout_s
    waiting = list(names)
    while waiting:
        metadata = admin.list_topics(timeout=timeout_s)
        waiting = [name for name in waiting if not _led(metadata.topics.get(name))]
        if not waiting:
            return
        if time.monotonic() >= deadline:
            raise KafkaClientError(
                f"topics {waiting}: no leader for every partition within {timeout_s} s",
                code="_TIMED_OUT",
            )
        time.sleep(0.1)


def _led(topic: Any) -> bool:
    if topic is None or topic.error is not None or not topic.partitions:
        return False
    return all(p.leader >= 0 for p in topic.partitions.values())
