"""A record the store hands out before its due time is held back and reported."""

from __future__ import annotations

from pathlib import Path

from delaybridge.bridge.commit.offsets import OffsetTracker
from delaybridge.bridge.delivery.deliverer import Deliverer
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.partition.state import PartitionState
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.produce.resend import Resender
from delaybridge.bridge.produce.retry_queue import RetryQueue
from delaybridge.bridge.telemetry import Telemetry
from delaybridge.settings import DeliverySettings
from delaybridge.timerlog import ManualClock, StoreSettings, TimerRecord, TimerStore
from tests.fakes import FakeCluster, FakeConsumer, FakeProducer

T = 1_700_000_000_000


def test_an_early_record_is_held_counted_and_reaches_the_metric(tmp_path: Path) -> None:
    # The store's clock runs 10 s ahead of the deliverer's (a clock stepped back, say):
    # the store hands out a record the deliverer's clock says is 5 s early.
    store_clock = ManualClock(T + 10_000)
    store = TimerStore.open(
        tmp_path / "s", StoreSettings(tick_ms=100, wheel_slots=1024), store_clock
    )
    store.append([TimerRecord("e", T + 5_000, "orders", -1, b"k", b"v", (), 0, T)])
    store_clock.advance(200)  # past due at once: due on the next tick
    part = PartitionState("delay", 0, store, OffsetTracker(0), 0.0)
    cluster = FakeCluster()
    cluster.create_topic("delay")
    cluster.create_topic("orders")
    producer = FakeProducer(cluster)
    tally = Tally()
    outbox = Outbox(producer)
    clock = ManualClock(T)
    resender = Resender(outbox, RetryQueue(), clock)
    deliverer = Deliverer(outbox, DeliverySettings(), "dlt", clock, tally, resender)

    deliverer.pump([part])

    assert len(producer) == 0 and cluster.records("orders") == []  # held, not sent
    assert part.pipeline.held == 1
    metrics = Metrics(process=False)
    Telemetry(metrics, tally).publish([part], FakeConsumer(cluster, "g"), in_flight=0)
    assert metrics.registry.get_sample_value("delaybridge_early_deliveries_total") == 1
    part.close()


def test_lateness_counts_from_when_a_message_could_first_go_out(tmp_path: Path) -> None:
    # Sent 10 s after its due time: delivered at once, it is on time, not 10 s late.
    clock = ManualClock(T)
    store = TimerStore.open(tmp_path / "s", StoreSettings(tick_ms=100, wheel_slots=1024), clock)
    store.append([TimerRecord("past", T - 10_000, "orders", -1, b"k", b"v", (), 0, T)])
    clock.advance(150)
    part = PartitionState("delay", 0, store, OffsetTracker(0), 0.0)
    cluster = FakeCluster()
    cluster.create_topic("orders")
    tally = Tally()
    outbox = Outbox(FakeProducer(cluster))
    resender = Resender(outbox, RetryQueue(), clock)
    deliverer = Deliverer(outbox, DeliverySettings(), "dlt", clock, tally, resender)
    deliverer.pump([part])
    assert tally.lateness_ms == [150]
    part.close()
