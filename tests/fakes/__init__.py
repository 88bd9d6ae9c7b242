"""In-memory Kafka for unit tests: a cluster and clients that fail on demand."""

from tests.fakes.clients import FakeAdmin, FakeClients, FakeProducer
from tests.fakes.cluster import FakeCluster, Stored
from tests.fakes.consumer import FakeConsumer

__all__ = ["FakeAdmin", "FakeClients", "FakeCluster", "FakeConsumer", "FakeProducer", "Stored"]
