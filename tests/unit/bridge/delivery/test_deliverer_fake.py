"""Delivery on the fakes: a full producer queue, a missing target, refused records."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError

from tests.unit.bridge.sidecar_kit import DELAY, DLT, ORDERS, FakeSidecar, schedule


def test_a_full_producer_queue_holds_records_and_delivers_them_in_order_later(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    for i in range(10):
        side.send(schedule(f"m{i}", 100))
    side.turns(1)
    side.producer.queue_capacity = 3
    side.producer.hold_acks = True
    side.turns(1, advance_ms=300)
    assert len(side.producer) == 3  # full (a cancel horizon record may take a place)
    queued = sum(q.topic == ORDERS for q in side.producer.queue)
    assert 0 < queued <= 3
    assert side.service.partitions.by_key[(DELAY, 0)].pipeline.held == 10 - queued
    side.producer.hold_acks = False
    side.turns(5)
    assert [h["delay-id"] for h in side.delivered()] == [f"m{i}" for i in range(10)]
    side.stop()


def test_a_missing_target_is_retried_then_dead_lettered_after_the_retry_window(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path, delivery={"missing_topic_retry_ms": 10_000})
    side.send(schedule("lost", 100, target="no-such-topic"))
    side.turns(2, advance_ms=200)
    assert side.cluster.records(DLT) == []
    side.turns(2, advance_ms=4_000)
    assert side.cluster.records(DLT) == []  # still inside the retry window
    side.turns(6, advance_ms=4_000)
    (dead,) = side.cluster.records(DLT)
    assert dict(dead.headers() or [])["delay-error"] == b"target-topic-missing"
    side.service.checkpoint()
    assert side.service.metrics.registry.get_sample_value(
        "delaybridge_delivery_retries_total", {"reason": "target-topic-missing"}
    )
    side.stop()


def test_a_record_refused_as_too_large_goes_to_the_dead_letter_topic(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("big", 100))
    side.turns(1)
    side.producer.refuse_next(ORDERS, KafkaError.MSG_SIZE_TOO_LARGE)
    side.turns(3, advance_ms=200)
    assert side.delivered() == []
    (dead,) = side.cluster.records(DLT)
    assert dict(dead.headers() or [])["delay-error"] == b"record-too-large"
    side.stop()


def test_a_dead_letter_the_topic_refuses_is_retried_until_it_is_written(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("big", 100))
    side.turns(1)
    side.producer.refuse_next(ORDERS, KafkaError.MSG_SIZE_TOO_LARGE)
    side.producer.fail_next(DLT, KafkaError.REQUEST_TIMED_OUT, times=2)
    side.turns(3, advance_ms=200)
    assert side.cluster.records(DLT) == []
    part = side.service.partitions.by_key[(DELAY, 0)]
    # Parked in the store for its retry: the cursor moved on, nothing held in memory.
    assert part.pipeline.in_flight == 0 and part.store.stats().pending == 1
    side.turns(4, advance_ms=3_000)
    (dead,) = side.cluster.records(DLT)
    headers = dict(dead.headers() or [])
    assert headers["delay-error"] == b"record-too-large"
    assert "delaybridge-retry" not in headers  # the parked state never goes out
    assert part.store.stats().pending == 0
    side.stop()
