"""A sidecar on the in-memory fakes, for broker-free tests of the service's logic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from delaybridge.bridge.service import Service
from delaybridge.connectors import header_text
from delaybridge.settings import Settings, load
from delaybridge.timerlog import ManualClock
from tests.fakes import FakeClients, FakeCluster, FakeConsumer, FakeListenerProbe, FakeProducer
from tests.support import overlay

DELAY = "delay"
ORDERS = "orders"
DLT = "dlt"
CANCELS = "cancels"


def fake_settings(data_dir: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "delay_topics": [DELAY],
        "dead_letter_topic": DLT,
        "cancel_topic": CANCELS,
        "store": {"data_dir": str(data_dir), "tick_ms": 100, "wheel_slots": 1024},
        "shutdown_grace_ms": 200,
        # Values at the next flush, as the tests here check the changelog after one
        # checkpoint on a manual clock; test_changelog_write_behind.py tests the default.
        "changelog": {"write_behind_ms": 0},
    }
    return load(None, **overlay(base, overrides))


class FakeSidecar:
    """A :class:`Service` on a fake cluster with a manual clock, driven turn by turn."""

    def __init__(
        self,
        data_dir: Path,
        clock: ManualClock | None = None,
        cluster: FakeCluster | None = None,
        **overrides: Any,
    ) -> None:
        self.clock = clock or ManualClock()
        self.cluster = cluster or FakeCluster(clock=self.clock)
        self.cluster.create_topic(DELAY, 2)
        self.cluster.create_topic(ORDERS, 2)
        self.clients = FakeClients(self.cluster)
        self.listener = FakeListenerProbe()
        """Kafka's listener as the reachability tracker sees it."""
        settings = fake_settings(data_dir, **overrides)
        self.service = Service(settings, self.clock, self.clients, probe=self.listener)
        self.service.start()

    @property
    def producer(self) -> FakeProducer:
        return self.clients.producers[0]

    @property
    def consumer(self) -> FakeConsumer:
        """The service's group consumer (a new one if it replaced a failed one)."""
        consumer = self.service.consumer
        assert isinstance(consumer, FakeConsumer)
        return consumer

    def send(
        self,
        headers: list[tuple[str, str]],
        *,
        partition: int = 0,
        key: bytes | None = b"k",
        value: bytes | None = b"v",
    ) -> int:
        """A record in the delay topic, as a producer would write it; returns its offset."""
        return self.cluster.append(DELAY, partition, key, value, headers)

    def turns(self, n: int = 3, advance_ms: int = 0) -> None:
        for _ in range(n):
            self.clock.advance(advance_ms)
            self.service.turn()

    def checkpoint(self) -> None:
        self.service.checkpoint()

    def committed(self, partition: int) -> int | None:
        return self.cluster.committed.get(("delaybridge", DELAY, partition))

    def delivered(self, topic: str = ORDERS) -> list[dict[str, str]]:
        """Headers (as text) of every record in ``topic``."""
        return [header_text(m) for m in self.cluster.records(topic)]

    def cancels(self) -> list[Any]:
        """The cancel topic's records that are cancels, not schedules' replaces."""
        return [m for m in self.cluster.records(CANCELS) if b'"replace"' not in (m.value() or b"")]

    def kill9(self, *, changelog_written: bool = False) -> None:
        """Like ``kill -9``: no flush, no commit, no acks of what is still queued;
        ``changelog_written``: the changelog records queued reach the cluster first
        (Kafka took them, the acknowledgements never came back)."""
        for part in [*self.service.partitions, *self.service.partitions.lost.values()]:
            part.store.abandon()  # the process's locks go with it, lost partitions' too
        if changelog_written:
            for queued in list(self.producer.queue):
                if queued.topic.endswith("-changelog"):
                    self.producer._report(queued)
        self.producer.queue.clear()
        self.consumer.crash()

    def stop(self) -> None:
        self.service.shutdown()


def schedule(id: str, delay_ms: int, target: str = ORDERS) -> list[tuple[str, str]]:
    return [("delay-target-topic", target), ("delay-ms", str(delay_ms)), ("delay-id", id)]
