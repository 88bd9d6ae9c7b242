"""In-memory Kafka for unit tests: a cluster and clients that fail on demand."""

from tests.fakes.clients import FakeAdmin, FakeClients, FakeConsumer, FakeProducer
from tests.fakes.cluster import FakeCluster, Stored

__all__ = ["FakeAdmin", "FakeClients", "FakeCluster", "FakeConsumer", "FakeProducer", "Stored"]
