"""One process owning partition 0 of a delay topic, with its OwnHorizons, on the fakes."""

from __future__ import annotations

from delaybridge.bridge.cancels.horizon import CancelHorizon
from delaybridge.bridge.cancels.own_horizons import OwnHorizons
from delaybridge.bridge.produce.outbox import Outbox
from tests.fakes import FakeAdmin, FakeCluster, FakeProducer

DELAY = "delay"
KEY = (DELAY, 0)


class Owner:
    """One process owning partition 0 of the delay topic, checking every
    ``interval_ms``; ``read`` is its consumer's position there."""

    def __init__(self, interval_ms: int) -> None:
        self.cluster = FakeCluster()
        self.cluster.create_topic(DELAY)
        self.cluster.create_topic("cancels")
        self.cluster.create_topic("horizons")
        self.producer = FakeProducer(self.cluster)
        self.horizon = CancelHorizon(60_000, lambda c: 0)
        self.own = OwnHorizons(
            self.horizon,
            FakeAdmin(self.cluster),
            Outbox(self.producer),
            "horizons",
            "me",
            interval_ms,
            "cancels",
            feed_position=lambda c: 10**9,
            feed_partitions=lambda: [0],
        )
        self.read = 0
