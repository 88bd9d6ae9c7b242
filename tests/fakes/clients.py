"""Fake producer, consumer and admin over a :class:`FakeCluster`, with faults on demand.

They implement :mod:`delaybridge.connectors.edge` with confluent-kafka's semantics:

- **producer**: ``produce`` queues (``BufferError`` past ``queue_capacity``; a refusal
  rule raises ``KafkaException`` at once); ``poll`` serves delivery reports: the record is
  appended to the cluster, or fails with a rule's error, ``_UNKNOWN_TOPIC`` for a
  missing topic or ``_UNKNOWN_PARTITION`` for a missing partition. ``hold_acks`` keeps
  everything in flight (a report that never comes, as before a ``kill -9``).
- **consumer**: ``tests/fakes/consumer.py`` (group membership, rebalances, isolation);
- **transactions**: ``tests/fakes/transactions.py`` (a producer with ``transactional.id``).
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, Message, TopicPartition

from tests.fakes.cluster import FakeCluster
from tests.fakes.consumer import FakeConsumer

Rule = tuple[str, int]  # (topic, error code)


@dataclass
class _Queued:
    topic: str
    value: bytes | None
    key: bytes | None
    partition: int
    headers: Any
    on_delivery: Callable[[KafkaError | None, Message], None] | None


@dataclass
class FakeProducer:
    cluster: FakeCluster
    config: dict[str, Any] = field(default_factory=dict)
    queue_capacity: int = 100_000
    hold_acks: bool = False
    queue: deque[_Queued] = field(default_factory=deque)
    _fail: list[Rule] = field(default_factory=list)
    _refuse: list[Rule] = field(default_factory=list)

    def fail_next(self, topic: str, code: int, times: int = 1) -> None:
        """The next ``times`` records to ``topic`` get a failed delivery report."""
        self._fail += [(topic, code)] * times

    def refuse_next(self, topic: str, code: int, times: int = 1) -> None:
        """The next ``times`` produce() calls for ``topic`` raise KafkaException."""
        self._refuse += [(topic, code)] * times

    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        *,
        on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        value = value.encode() if isinstance(value, str) else value
        key = key.encode() if isinstance(key, str) else key
        if len(self.queue) >= self.queue_capacity:
            raise BufferError("Local: Queue full")
        code = _take(self._refuse, topic)
        if code is not None:
            raise KafkaException(KafkaError(code))
        self.queue.append(_Queued(topic, value, key, partition, headers, on_delivery))

    def poll(self, timeout: float = -1) -> int:
        served = 0
        while self.queue and not self.hold_acks:
            self._report(self.queue.popleft())
            served += 1
        return served

    def flush(self, timeout: float = -1) -> int:
        self.poll(0)
        return len(self.queue)

    def __len__(self) -> int:
        return len(self.queue)

    def _report(self, q: _Queued) -> None:
        err: KafkaError | None = None
        offset = -1
        partition = q.partition
        parts = self.cluster.topics.get(q.topic)
        code = _take(self._fail, q.topic)
        if code is not None:
            err = KafkaError(code)
        elif parts is None:
            err = KafkaError(KafkaError._UNKNOWN_TOPIC)
        elif partition >= len(parts):
            err = KafkaError(KafkaError._UNKNOWN_PARTITION)
        else:
            if partition < 0:
                partition = zlib.crc32(q.key) % len(parts) if q.key is not None else 0
            offset = self._append(q, partition)
        if err is not None:
            self._failed(err)
        msg = Message(topic=q.topic, partition=partition, offset=offset, key=q.key, value=q.value)
        if q.on_delivery is not None:
            q.on_delivery(err, msg)

    def _append(self, q: _Queued, partition: int) -> int:
        return self.cluster.append(q.topic, partition, q.key, q.value, q.headers)

    def _failed(self, err: KafkaError) -> None:
        """A delivery failed (a transactional producer must then abort)."""

    # Transactions: only a producer built with transactional.id (tests/fakes/transactions).
    def init_transactions(self, timeout: float = -1) -> None:
        raise KafkaException(KafkaError(KafkaError._NOT_CONFIGURED, "no transactional.id"))

    def begin_transaction(self) -> None:
        self.init_transactions()

    def send_offsets_to_transaction(
        self, positions: Any, group_metadata: Any, timeout: float = -1
    ) -> None:
        self.init_transactions()

    def commit_transaction(self, timeout: float = -1) -> None:
        self.init_transactions()

    def abort_transaction(self, timeout: float = -1) -> None:
        self.init_transactions()


def _take(rules: list[Rule], topic: str) -> int | None:
    for i, (t, code) in enumerate(rules):
        if t == topic:
            del rules[i]
            return code
    return None


@dataclass
class FakeAdmin:
    cluster: FakeCluster
    config: dict[str, Any] = field(default_factory=dict)
    polls: int = 0
    """How often its callbacks were served."""

    def describe_consumer_groups(self, group_ids: list[str], **kwargs: Any) -> dict[str, Any]:
        out: dict[str, Future[Any]] = {}
        for group in group_ids:
            members = [
                SimpleNamespace(
                    member_id=m.member_id,
                    group_instance_id=m.config.get("group.instance.id"),
                    assignment=SimpleNamespace(
                        topic_partitions=[TopicPartition(t, p) for t, p in sorted(m.owned)]
                    ),
                )
                for m in self.cluster.groups.get(group, [])
            ]
            out[group] = Future()
            out[group].set_result(SimpleNamespace(group_id=group, members=members))
        return out

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        return self.cluster.metadata(topic)

    def list_offsets(
        self, topic_partition_offsets: dict[TopicPartition, Any], **kwargs: Any
    ) -> dict[TopicPartition, Future[Any]]:
        """The earliest (0) or the latest offset of each partition, as asked: for a
        read_committed request the end of what is committed, else the high watermark."""
        committed = kwargs.get("isolation_level") == IsolationLevel.READ_COMMITTED
        out: dict[TopicPartition, Future[Any]] = {}
        for tp, spec in topic_partition_offsets.items():
            earliest = "Earliest" in type(spec).__name__
            offset = 0 if earliest else self.cluster.end(tp.topic, tp.partition, committed)
            future: Future[Any] = Future()
            future.set_result(SimpleNamespace(offset=offset))
            out[tp] = future
        return out

    def create_topics(self, new_topics: list[Any], **kwargs: Any) -> dict[str, Future[None]]:
        futures: dict[str, Future[None]] = {}
        for new in new_topics:
            self.cluster.create_topic(new.topic, new.num_partitions, new.config)
            futures[new.topic] = Future()
            futures[new.topic].set_result(None)
        return futures

    def poll(self, timeout: float = -1) -> int:
        self.polls += 1
        return 0


@dataclass
class FakeClients:
    """A :class:`~delaybridge.connectors.edge.ClientFactory` over one fake cluster."""

    cluster: FakeCluster
    producers: list[FakeProducer] = field(default_factory=list)
    consumers: list[FakeConsumer] = field(default_factory=list)
    admins: list[FakeAdmin] = field(default_factory=list)

    def producer(self, overrides: Mapping[str, Any] | None = None) -> FakeProducer:
        config = dict(overrides or {})
        if "transactional.id" in config:
            from tests.fakes.transactions import TransactionalProducer

            producer: FakeProducer = TransactionalProducer(self.cluster, config)
        else:
            producer = FakeProducer(self.cluster, config)
        self.producers.append(producer)
        return producer

    def consumer(
        self, overrides: Mapping[str, Any] | None = None, *, group: bool = True
    ) -> FakeConsumer:
        config = dict(overrides or {})
        consumer = FakeConsumer(self.cluster, str(config.get("group.id", "delaybridge")), config)
        self.consumers.append(consumer)
        return consumer

    def admin(self, overrides: Mapping[str, Any] | None = None) -> FakeAdmin:
        admin = FakeAdmin(self.cluster, dict(overrides or {}))
        self.admins.append(admin)
        return admin
