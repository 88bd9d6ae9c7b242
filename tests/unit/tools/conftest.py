"""``fake_kafka``: the Kafka edge's constructors build the in-memory fakes, and say how.

``connectors/clients.py`` is the only place confluent-kafka's ``Producer``, ``Consumer``
and ``AdminClient`` are built. This fixture replaces those three names there with
builders that record the librdkafka configuration of every client and hand back the
project's fakes (``tests/fakes``) on one :class:`~tests.fakes.FakeCluster`, so an entry
point runs end to end with no socket opened, and the test can check what each client
was configured with. A client built around the edge is not recorded at all, which is
why the tests also count the clients of each entry point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Message, TopicPartition

from tests.fakes import FakeAdmin, FakeCluster, FakeConsumer, FakeProducer
from tests.fakes.cluster import Txn

#: Called with (topic, partition, offset) after every append (a stand-in sidecar
#: forwards from here).
OnAppend = Callable[[str, int, int], None]


@dataclass
class WatchedCluster(FakeCluster):
    """A fake cluster that tells listeners about every record appended."""

    on_append: list[OnAppend] = field(default_factory=list)

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any = None,
        timestamp_ms: int | None = None,
        txn: Txn | None = None,
    ) -> int:
        offset = super().append(topic, partition, key, value, headers, timestamp_ms, txn)
        for listener in list(self.on_append):
            listener(topic, partition, offset)
        return offset


class OffsetsAdmin(FakeAdmin):
    """The admin calls of the Spark side too: deleting topics. (Listing offsets and the
    demo's group-coordinator probe are FakeAdmin's.)"""

    def delete_topics(self, names: list[str], **kwargs: Any) -> dict[str, Future[None]]:
        for name in names:
            self.cluster.topics.pop(name, None)
        return {name: _done(None) for name in names}

    def list_offsets(
        self, topic_partition_offsets: dict[TopicPartition, Any], **kwargs: Any
    ) -> dict[TopicPartition, Future[Any]]:
        def offset(tp: Any, spec: Any) -> int:
            earliest = "Earliest" in type(spec).__name__
            return 0 if earliest else self.cluster.end(tp.topic, tp.partition)

        return {
            tp: _done(SimpleNamespace(offset=offset(tp, spec)))
            for tp, spec in topic_partition_offsets.items()
        }


class PollingConsumer(FakeConsumer):
    """Also ``poll()``: one record or None (the demo's watcher and the probe use it)."""

    def poll(self, timeout: float = -1) -> Message | None:
        got = self.consume(1, timeout)
        return got[0] if got else None


def _done(result: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(result)
    return future


@dataclass
class Captured:
    """The cluster the fakes share, and (kind, librdkafka config) of each client built."""

    cluster: WatchedCluster
    built: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@pytest.fixture
def fake_kafka(monkeypatch: pytest.MonkeyPatch) -> Iterator[Captured]:
    import delaybridge.connectors.clients as clients

    seen = Captured(WatchedCluster())

    def producer(conf: dict[str, Any], logger: Any = None) -> FakeProducer:
        seen.built.append(("Producer", dict(conf)))
        return FakeProducer(seen.cluster, dict(conf))

    def consumer(conf: dict[str, Any], logger: Any = None) -> FakeConsumer:
        seen.built.append(("Consumer", dict(conf)))
        return PollingConsumer(seen.cluster, str(conf["group.id"]), dict(conf))

    def admin(conf: dict[str, Any], logger: Any = None) -> FakeAdmin:
        seen.built.append(("AdminClient", dict(conf)))
        return OffsetsAdmin(seen.cluster)

    monkeypatch.setattr(clients, "Producer", producer)
    monkeypatch.setattr(clients, "Consumer", consumer)
    monkeypatch.setattr(clients, "AdminClient", admin)
    yield seen
