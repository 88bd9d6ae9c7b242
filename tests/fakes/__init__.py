"""In-memory Kafka for unit tests: a cluster and clients that fail on demand."""

from tests.fakes.clients import FakeAdmin, FakeClients, FakeProducer
from tests.fakes.cluster import FakeCluster, Stored
from tests.fakes.consumer import FakeConsumer
from tests.fakes.listener import FakeListenerProbe

__all__ = [
    "FakeAdmin",
    "FakeClients",
    "FakeCluster",
    "FakeConsumer",
    "FakeListenerProbe",
    "FakeProducer",
    "Stored",
]
