"""From the loop's state to /metrics: counts made anywhere in the loop reach their counters
at the next refresh, on the fakes (bridge/telemetry.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.telemetry import DISK_BYTES_EVERY_S
from delaybridge.timerlog import TimerStore
from delaybridge.timerlog.stats import StoreStats
from tests.fakes.transactions import TransactionalProducer
from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule


def sample(metrics: Metrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(name)


def sample_labelled(metrics: Metrics, name: str, labels: dict[str, str]) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_rolls_the_stores_count_reach_their_counter(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)  # tick 100 ms x 1024 slots: a window of 102.4 s
    side.send(schedule("far", 300_000))
    side.turns(1)
    side.turns(30, advance_ms=10_000)
    rolled = sum(part.store.stats().rolled_total for part in side.service.partitions)
    assert rolled >= 1
    side.checkpoint()
    assert sample(side.service.metrics, "delaybridge_rolled_total") == rolled
    side.checkpoint()  # counted once, not again at every refresh
    assert sample(side.service.metrics, "delaybridge_rolled_total") == rolled
    side.stop()


def test_a_backpressure_pause_reaches_its_counter(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, store={"max_pending_messages": 2})
    for i in range(5):
        side.send(schedule(f"m{i}", 600_000))
    side.turns(2)
    side.checkpoint()  # flow control pauses ingest here
    assert side.service.flow.backpressure
    side.checkpoint()
    assert sample(side.service.metrics, "delaybridge_backpressure_pauses_total") == 1
    side.stop()


def test_transactions_reach_their_counters_and_the_abort_gauge(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, delivery={"exactly_once": True})
    producer = side.producer
    assert isinstance(producer, TransactionalProducer)
    metrics = side.service.metrics
    side.send(schedule("now", 0))
    side.turns(3, advance_ms=200)
    producer.fail_commit_next(abortable=True)
    side.checkpoint()
    assert sample(metrics, "delaybridge_transactions_aborted_total") == 1
    assert sample(metrics, "delaybridge_transactions_committed_total") == 0
    assert sample(metrics, "delaybridge_transaction_consecutive_aborts") == 1
    side.turns(3, advance_ms=200)
    side.checkpoint()
    assert sample(metrics, "delaybridge_transactions_committed_total") == 1
    assert sample(metrics, "delaybridge_transaction_consecutive_aborts") == 0
    side.stop()


def test_the_consumer_lag_of_a_paused_partition_is_not_stale(tmp_path: Path) -> None:
    """librdkafka caches a partition's high watermark from its fetches, and a paused
    partition is not fetched: before, the lag gauge kept the value it had when ingest
    paused (a disk pause, back-pressure) for as long as the pause lasted (issue 25)."""
    side = FakeSidecar(tmp_path, store={"max_pending_messages": 2})
    for i in range(3):
        side.send(schedule(f"m{i}", 600_000))
    side.turns(2)
    side.checkpoint()  # over the pending limit: ingest pauses
    assert side.service.flow.backpressure
    lag = {"topic": DELAY, "partition": "0"}
    assert sample_labelled(side.service.metrics, "delaybridge_consumer_lag_messages", lag) == 0
    for i in range(3, 40):  # producers go on writing while ingest is paused
        side.send(schedule(f"m{i}", 600_000))
    side.turns(2, advance_ms=6_000)
    side.checkpoint()  # asks the brokers (every 5 s): the answer is read at the next one
    side.turns(1, advance_ms=200)
    side.checkpoint()
    assert sample_labelled(side.service.metrics, "delaybridge_consumer_lag_messages", lag) == 37
    side.stop()


def test_the_stores_bytes_on_disk_are_measured_every_few_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stat of every file of every store at every flush (200 ms) was a large part of an
    # idle sidecar's CPU (issue 26: idle ≤ 1 % of a core): every DISK_BYTES_EVERY_S now.
    side = FakeSidecar(tmp_path)
    side.turns(2)
    asked: list[bool] = []
    real = TimerStore.stats

    def stats(self: TimerStore, disk: bool = True) -> StoreStats:
        asked.append(disk)
        return real(self, disk)

    monkeypatch.setattr(TimerStore, "stats", stats)
    flushes = int(DISK_BYTES_EVERY_S * 1000 // 200)
    for _ in range(2 * flushes):
        side.turns(1, advance_ms=200)
        side.checkpoint()
    per_flush = len(side.service.partitions.by_key)
    assert len(asked) == 2 * flushes * per_flush
    assert 1 <= asked.count(True) // per_flush <= 3
    gauge = side.service.metrics.registry.get_sample_value(
        "delaybridge_store_bytes", {"topic": DELAY, "partition": "0"}
    )
    assert gauge is not None and gauge > 0  # the last measure stands between two
    side.stop()
