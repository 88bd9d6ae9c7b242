"""Every Kafka client delaybridge uses, built from one :class:`KafkaSettings`.

``KafkaClients(settings)`` derives the librdkafka configuration of four kinds of client
and builds them; nothing else in delaybridge calls confluent-kafka's constructors, so a
setting given once (``kafka.client``: ``security.protocol``, ``sasl.*``, ``ssl.*``, ...)
reaches every client: the sidecar's, ``delaybridge send``/``cancel``, the demo, the
benchmarks, the passthrough forwarder, the Spark job's offset snapshot.

=============  ===========================================================================
kind           what it is for, and what it sets on top of ``bootstrap.servers`` + ``client``
=============  ===========================================================================
``producer``   idempotent, ``acks=all``, the Java clients' murmur2 partitioner (a keyed
               record lands where a Java producer would put it). A transactional producer
               is this one plus ``transactional.id`` (idempotence is already on).
``consumer``   the sidecar's group member: ``read_committed``, ``cooperative-sticky``,
               no auto commit and no auto offset store (offsets are committed only behind
               flushed data), static membership when ``instance_id`` is set.
``reader``     outside the sidecar's group: a throw-away ``group.id`` (librdkafka wants
               one), no static membership, never commits; for ``assign()`` feeds and
               watchers, or a one-off ``subscribe()``.
``admin``      topics, metadata and offsets.
=============  ===========================================================================

Overrides (a mapping of librdkafka settings) win over everything:
``clients.producer({"linger.ms": 5})``. ``KafkaClients`` is the sidecar's
:class:`~delaybridge.connectors.edge.ClientFactory` (``consumer(group=False)`` is a
reader). Building a client makes no network call here;
librdkafka connects in the background.
A configuration librdkafka refuses raises :class:`KafkaClientError` naming the kind.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from delaybridge.connectors.errors import KafkaClientError, wrap
from delaybridge.connectors.settings import KafkaSettings

log = logging.getLogger("delaybridge.connectors.kafka")

Config = dict[str, Any]
#: librdkafka settings that win over the settings and the defaults of a kind.
Overrides = Mapping[str, Any] | None
T = TypeVar("T")


class KafkaClients:
    """Configurations and clients for one cluster; cheap to build, holds no connection."""

    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings

    def __repr__(self) -> str:
        s = self.settings
        return f"KafkaClients({s.bootstrap_servers!r}, client={s.redacted_client()!r})"

    # -- configurations -------------------------------------------------------------------

    def base_config(self) -> Config:
        """What every client gets: the brokers and the deployment's client settings."""
        return {"bootstrap.servers": self.settings.bootstrap_servers, **self.settings.client}

    def producer_config(self, overrides: Overrides = None) -> Config:
        return {
            **self.base_config(),
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "request.timeout.ms": self.settings.request_timeout_ms,
            **(overrides or {}),
        }

    def consumer_config(self, overrides: Overrides = None) -> Config:
        s = self.settings
        conf: Config = {
            **self.base_config(),
            "group.id": s.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": s.session_timeout_ms,
            "socket.timeout.ms": s.request_timeout_ms,
        }
        if s.instance_id:
            conf["group.instance.id"] = s.instance_id
        return {**conf, **(overrides or {})}

    def reader_config(self, overrides: Overrides = None) -> Config:
        return {
            **self.base_config(),
            "group.id": f"{self.settings.group_id}.reader-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "socket.timeout.ms": self.settings.request_timeout_ms,
            **(overrides or {}),
        }

    def admin_config(self, overrides: Overrides = None) -> Config:
        return {**self.base_config(), **(overrides or {})}

    # -- clients ---------------------------------------------------------------------------

    def producer(self, overrides: Overrides = None) -> Producer:
        conf, logger = _split_logger(self.producer_config(overrides))
        return _build("producer", lambda: Producer(conf, logger=logger))

    def consumer(self, overrides: Overrides = None, *, group: bool = True) -> Consumer:
        """The sidecar's group member; ``group=False`` is a :meth:`reader` instead."""
        if not group:
            return self.reader(overrides)
        conf, logger = _split_logger(self.consumer_config(overrides))
        return _build("group consumer", lambda: Consumer(conf, logger=logger))

    def reader(self, overrides: Overrides = None) -> Consumer:
        conf, logger = _split_logger(self.reader_config(overrides))
        return _build("reader", lambda: Consumer(conf, logger=logger))

    def admin(self, overrides: Overrides = None) -> AdminClient:
        conf, logger = _split_logger(self.admin_config(overrides))
        return _build("admin client", lambda: AdminClient(conf, logger=logger))


def _split_logger(conf: Config) -> tuple[Config, Any]:
    """librdkafka's log lines go to Python logging: ours, unless an override names one."""
    conf = dict(conf)
    return conf, conf.pop("logger", log)


def _build(kind: str, construct: Callable[[], T]) -> T:
    try:
        return construct()
    except KafkaException as exc:
        raise wrap(exc, f"cannot create a Kafka {kind}") from exc
    except (TypeError, ValueError) as exc:  # a value of the wrong type, e.g. in `client`
        raise KafkaClientError(f"cannot create a Kafka {kind}: {exc}") from exc
