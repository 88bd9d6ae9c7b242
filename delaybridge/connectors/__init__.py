"""The edges to Kafka: every client from one settings object, and a local dev broker.

Public names (import them from here):

* :class:`KafkaSettings` — brokers, group, librdkafka ``client`` settings (TLS, SASL);
  :data:`SECRET_KEYS`, :func:`redact` — what is never logged.
* :class:`KafkaClients` — ``KafkaClients(settings).producer() / .consumer() / .reader()
  / .admin()``: the only place confluent-kafka clients are built.
* :func:`try_produce`, :func:`produce_blocking`, :func:`produce_and_wait`,
  :class:`RecordRef` — producing, with a full queue handled once.
* :func:`wrap`, :func:`from_error`, :class:`KafkaClientError`, :class:`ProduceError` —
  librdkafka's errors as ours, with librdkafka's error object kept.
* :func:`ensure_topics`, :func:`headers_of`, :func:`header_text`.

``connectors.localkafka`` is the local broker (``delaybridge kafka up``). This package
imports nothing from ``bridge``, ``timerlog``, ``wheel``, ``spark`` or ``tools``
(import-linter checks it). The names load on first use, so ``import delaybridge``
and the CLI's start-up stay free of confluent-kafka and pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from delaybridge.connectors.clients import KafkaClients
    from delaybridge.connectors.errors import (
        KafkaClientError,
        ProduceError,
        from_error,
        is_fatal,
        wrap,
    )
    from delaybridge.connectors.produce import (
        RecordRef,
        produce_and_wait,
        produce_blocking,
        try_produce,
    )
    from delaybridge.connectors.records import header_text, headers_of
    from delaybridge.connectors.settings import SECRET_KEYS, KafkaSettings, redact
    from delaybridge.connectors.topics import ensure_topics

_HOME = {
    "KafkaClients": "clients",
    "KafkaClientError": "errors",
    "ProduceError": "errors",
    "from_error": "errors",
    "is_fatal": "errors",
    "wrap": "errors",
    "RecordRef": "produce",
    "produce_and_wait": "produce",
    "produce_blocking": "produce",
    "try_produce": "produce",
    "header_text": "records",
    "headers_of": "records",
    "SECRET_KEYS": "settings",
    "KafkaSettings": "settings",
    "redact": "settings",
    "ensure_topics": "topics",
}

__all__ = [
    "SECRET_KEYS",
    "KafkaClientError",
    "KafkaClients",
    "KafkaSettings",
    "ProduceError",
    "RecordRef",
    "ensure_topics",
    "from_error",
    "header_text",
    "headers_of",
    "is_fatal",
    "produce_and_wait",
    "produce_blocking",
    "redact",
    "try_produce",
    "wrap",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
