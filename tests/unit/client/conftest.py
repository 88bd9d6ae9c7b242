"""A client on the in-memory Kafka fake (``tests/fakes``): it captures every produce call
as a record in its cluster, headers and all, and acknowledges it at ``poll()``."""

from __future__ import annotations

import pytest

from delaybridge.client import DelayClient
from tests.fakes.clients import FakeProducer
from tests.fakes.cluster import FakeCluster

DELAY = "delay"
#: 2026-01-01T00:00:00Z: the client's clock in these tests.
NOW_S = 1_767_225_600.0


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    for name in (DELAY, "orders", "dlt", "reminders"):
        cluster.create_topic(name, partitions=2)
    return cluster


@pytest.fixture
def producer(cluster: FakeCluster) -> FakeProducer:
    return FakeProducer(cluster)


@pytest.fixture
def client(producer: FakeProducer) -> DelayClient:
    return DelayClient(producer, DELAY, clock=lambda: NOW_S, uniform=lambda: 0.5)
