"""The Kafka cluster the integration tests share, and the helpers they use on it.

One :class:`KafkaCluster` serves a whole test session (``kafka`` in tests/conftest.py),
in the style of confluent-kafka-python's own tests: a bootstrap address, client
factories, ``create_topic()`` with unique names, and helpers that wait on a condition
with a deadline instead of sleeping. Every helper has a timeout, so a dead broker
fails a test with a message that names the topic and the address; it never hangs.

Where the cluster comes from is :mod:`tests.kafka_backends`' business; this module
only talks to a bootstrap address, so it works the same on all three backends.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from delaybridge.errors import KafkaError
from tests.support import wait_until

T = TypeVar("T")

_log = logging.getLogger("tests.kafka")
"""librdkafka's own log lines (connection refused, ...) go here, so pytest shows them
with a failing test instead of printing them over the progress output."""

Record = tuple[bytes | None, bytes | None]
"""A record as the helpers take it: (key, value)."""
HeaderList = list[tuple[str, str | bytes | None]]
"""Headers as confluent-kafka's ``produce`` takes them (str values are sent UTF-8)."""
RecordWithHeaders = tuple[bytes | None, bytes | None, HeaderList]
"""(key, value, headers): a record for the sidecar tests' ``produce``."""


class Backend(enum.Enum):
    """Where the session's cluster runs."""

    EXTERNAL = "external"  # DELAYBRIDGE_TEST_BOOTSTRAP names a running cluster
    CONTAINER = "container"  # testcontainers runs a Kafka image (podman or Docker)
    LOCAL = "local"  # delaybridge's LocalKafka: the pinned jars on this host's Java


class KafkaCluster:
    """A running cluster plus the small API the integration tests use.

    Clients it makes carry short timeouts (``timeout_s`` of the helper, 30 s by
    default) instead of librdkafka's five-minute defaults, so a broker that dies
    makes the test fail within that time.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        backend: Backend,
        description: str,
        *,
        stop: Callable[[], object] | None = None,
        kill: Callable[[], object] | None = None,
        handle: Any = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.backend = backend
        self.description = description
        self.handle = handle
        """The backend's own object (testcontainers' DockerContainer, a LocalKafka), or None."""
        self._stop = stop
        self._kill = kill

    def __repr__(self) -> str:
        return f"KafkaCluster({self.backend.value}: {self.description})"

    # -- clients -----------------------------------------------------------------

    def admin(self, **conf: Any) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap_servers, **conf}, logger=_log)

    def producer(self, **conf: Any) -> Producer:
        """A producer that gives up on a record after 30 s (``message.timeout.ms``)."""
        base = {
            "bootstrap.servers": self.bootstrap_servers,
            "message.timeout.ms": 30_000,
            "socket.timeout.ms": 10_000,
        }
        return Producer({**base, **conf}, logger=_log)

    def consumer(self, **conf: Any) -> Consumer:
        """A consumer in a fresh group, reading from the beginning, no auto-commit."""
        base = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": f"test-{uuid.uuid4().hex[:12]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "socket.timeout.ms": 10_000,
        }
        return Consumer({**base, **conf}, logger=_log)

    # -- topics --------------------------------------------------------------------

    def create_topic(
        self,
        prefix: str,
        partitions: int = 1,
        config: dict[str, str] | None = None,
        timeout_s: float = 30.0,
    ) -> str:
        """Create ``<prefix>-<random>`` and return its name once every partition has a leader."""
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        admin = self.admin()
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, config=config or {})],
            request_timeout=timeout_s,
        )
        try:
            futures[name].result(timeout=timeout_s)
        except KafkaException as exc:
            raise KafkaError(f"creating topic {name} on {self.bootstrap_servers}: {exc}") from exc

        def led() -> bool:
            meta = admin.list_topics(topic=name, timeout=5).topics.get(name)
            return (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == partitions
                and all(p.leader >= 0 for p in meta.partitions.values())
            )

        what = f"topic {name} to have a leader for all {partitions} partitions"
        wait_until(led, timeout_s, what, retry_on=(Exception,))
        return name

    def partitions(self, topic: str, timeout_s: float = 10.0) -> list[int]:
        """The partition ids of ``topic``; a KafkaError if the cluster does not answer."""
        try:
            meta = self.admin().list_topics(topic=topic, timeout=timeout_s).topics[topic]
        except KafkaException as exc:
            raise KafkaError(
                f"metadata for topic {topic} from {self.bootstrap_servers}: {exc}"
            ) from exc
        if meta.error is not None:
            raise KafkaError(f"topic {topic} on {self.bootstrap_servers}: {meta.error}")
        return sorted(meta.partitions)

    # -- round trips -------------------------------------------------------------

    def produce(
        self, topic: str, records: Iterable[Record], timeout_s: float = 30.0
    ) -> list[Message]:
        """Produce ``records`` and return their delivery reports, in order.

        Raises :class:`KafkaError` with the first delivery error (e.g. the broker is
        gone: ``_MSG_TIMED_OUT``) once librdkafka gives up, within ``timeout_s``.
        """
        delivered, failed, left = self._send(topic, records, timeout_s)
        count = len(delivered) + len(failed) + left
        if failed:
            err, _ = failed[0]
            raise KafkaError(
                f"producing to {topic} at {self.bootstrap_servers}: {len(failed)} of {count} "
                f"records failed, first: {err.str()}",
                err.name(),
            )
        if left:
            raise TimeoutError(
                f"producing to {topic} at {self.bootstrap_servers}: {left} of {count} records "
                f"still undelivered after {timeout_s + 5:.0f} s"
            )
        return sorted(delivered, key=lambda m: (m.partition() or 0, m.offset() or 0))

    def _send(
        self, topic: str, records: Iterable[Record], timeout_s: float
    ) -> tuple[list[Message], list[tuple[RdKafkaError, Message]], int]:
        # Its own frame, so that the producer is gone (and stops reconnecting) before
        # produce() raises: a traceback kept by pytest would otherwise keep it alive.
        producer = self.producer(**{"message.timeout.ms": int(timeout_s * 1000)})
        delivered: list[Message] = []
        failed: list[tuple[RdKafkaError, Message]] = []

        def report(err: RdKafkaError | None, msg: Message) -> None:
            if err is None:
                delivered.append(msg)
            else:
                failed.append((err, msg))

        for key, value in records:
            producer.produce(topic, key=key, value=value, on_delivery=report)
            producer.poll(0)
        left: int = producer.flush(timeout_s + 5)
        return delivered, failed, left

    def consume(self, topic: str, n: int, timeout_s: float = 30.0, **conf: Any) -> list[Message]:
        """Read the first ``n`` records of ``topic`` (all partitions, from the beginning).

        Assigns partitions directly rather than joining a group, so no rebalance
        delay; raises :class:`TimeoutError` with the count so far and the client's
        errors if fewer than ``n`` arrive within ``timeout_s``.
        """
        errors: list[str] = []
        consumer = self.consumer(error_cb=lambda e: errors.append(e.str()), **conf)
        got: list[Message] = []

        def have_all() -> bool:
            if len(got) < n and (msg := consumer.poll(0.5)) is not None:
                err = msg.error()
                if err is not None:
                    raise KafkaError(
                        f"consuming {topic} at {self.bootstrap_servers}: {err.str()}", err.name()
                    )
                got.append(msg)
            return len(got) >= n

        def so_far() -> str:
            seen = "; ".join(dict.fromkeys(errors)) or "none"
            return f"consumed {len(got)} of {n} (client errors: {seen})"

        try:
            parts = self.partitions(topic, timeout_s=min(10.0, timeout_s))
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
            what = f"{n} records from {topic} at {self.bootstrap_servers}"
            wait_until(have_all, timeout_s, what, interval_s=0, detail=so_far)
            return got
        finally:
            consumer.close()

    def wait_for(
        self,
        condition: Callable[[], T],
        timeout_s: float,
        what: str,
        interval_s: float = 0.05,
        retry_on: tuple[type[Exception], ...] = (Exception,),
    ) -> T:
        """:func:`tests.support.wait_until`, retrying on any exception by default
        (a broker that is still starting raises from most client calls)."""
        return wait_until(condition, timeout_s, what, interval_s=interval_s, retry_on=retry_on)

    def round_trip(self, prefix: str, n: int = 3, timeout_s: float = 30.0) -> list[Message]:
        """Create a topic, produce ``n`` records, read them back; assert they match."""
        topic = self.create_topic(prefix, timeout_s=timeout_s)
        sent = [(f"k{i}".encode(), f"v{i}-{uuid.uuid4().hex}".encode()) for i in range(n)]
        self.produce(topic, sent, timeout_s=timeout_s)
        got = self.consume(topic, n, timeout_s=timeout_s)
        received = [(m.key(), m.value()) for m in got]
        if received != sent:
            raise AssertionError(f"round trip through {topic}: sent {sent}, got {received}")
        return got

    # -- life cycle ----------------------------------------------------------------

    def kill(self) -> None:
        """Kill the broker at once, as a crash would (not for external clusters)."""
        if self._kill is None:
            raise RuntimeError(f"cannot kill a {self.backend.value} cluster ({self.description})")
        self._kill()

    def stop(self) -> None:
        """Stop what the backend started; an external cluster is left alone."""
        if self._stop is not None:
            stop, self._stop = self._stop, None
            stop()
