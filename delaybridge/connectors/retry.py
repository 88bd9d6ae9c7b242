"""Retrying a metadata or offset request while a partition's leader is being elected.

A topic created a moment ago, or a broker that just restarted, answers offset requests
with NOT_LEADER_FOR_PARTITION (or LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PART) for a
short while; and while a broker comes back, librdkafka's own side of the connection fails
requests locally: the handle of a broker it decommissions (_DESTROY_BROKER), a connection
lost (_TRANSPORT), a request that timed out, every broker down. :func:`while_electing`
calls a request again until it succeeds, the error is of another kind, or ``timeout_s``
passes; then raises it wrapped, naming ``what``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException

from delaybridge.connectors.errors import wrap

T = TypeVar("T")
ELECTING = frozenset(
    {
        RdKafkaError.NOT_LEADER_FOR_PARTITION,
        RdKafkaError.LEADER_NOT_AVAILABLE,
        RdKafkaError.UNKNOWN_TOPIC_OR_PART,
        RdKafkaError._UNKNOWN_PARTITION,
        RdKafkaError._DESTROY_BROKER,
        RdKafkaError._TRANSPORT,
        RdKafkaError._TIMED_OUT,
        RdKafkaError._ALL_BROKERS_DOWN,
    }
)


def while_electing(request: Callable[[], T], what: str, timeout_s: float = 30.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return request()
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            passing = isinstance(err, RdKafkaError) and (err.retriable() or err.code() in ELECTING)
            if not passing or time.monotonic() >= deadline:
                raise wrap(exc, what) from exc
            time.sleep(0.2)
