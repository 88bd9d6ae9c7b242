"""The sidecar's loop, ingest, delivery and partition life cycle, on the in-memory fakes.

No broker: every fault here (a delivery report that never comes, a full producer queue,
a partition revoked mid-flight, a refused record) is one line of setup.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError

from tests.unit.bridge.sidecar_kit import DELAY, DLT, ORDERS, FakeSidecar, schedule


def test_a_schedule_is_stored_committed_after_flush_and_delivered_when_due(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    offset = side.send(schedule("a", 1_000))
    side.turns(2)
    assert side.delivered() == []
    assert side.committed(0) is None  # not flushed yet: nothing committed
    side.checkpoint()
    assert side.committed(0) == offset + 1
    side.turns(1, advance_ms=900)
    assert side.delivered() == []  # never early
    side.turns(2, advance_ms=200)
    (headers,) = side.delivered()
    assert headers["delay-id"] == "a"
    assert headers["delay-origin"] == f"{DELAY}/0/{offset}"
    assert "delay-target-topic" not in headers
    side.stop()


def test_bad_input_is_dead_lettered_and_its_offset_commits_only_after_the_ack(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    side.producer.hold_acks = True
    side.send([("delay-target-topic", ORDERS), ("delay-ms", "soon")])
    side.turns(1)
    side.checkpoint()
    assert side.committed(0) is None  # the dead letter is not acknowledged yet
    side.producer.hold_acks = False
    side.turns(1)
    side.checkpoint()
    assert side.committed(0) == 1
    (dead,) = side.cluster.records(DLT)
    assert dict(dead.headers() or [])["delay-error"] == b"bad-time"
    side.stop()


def test_a_cancel_from_another_partition_reaches_the_store_through_the_cancel_topic(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("order-1", 5_000), partition=0)
    side.send([("delay-cancel", "order-1")], partition=1)
    side.turns(3)
    assert len(side.cancels()) == 1
    side.turns(3, advance_ms=2_000)
    assert side.delivered() == []
    assert side.service.partitions.by_key[(DELAY, 0)].store.stats().cancelled_total == 1
    side.stop()


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
    assert len(side.producer) == 3
    assert side.service.partitions.by_key[(DELAY, 0)].pipeline.held == 7
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


def test_revoked_mid_flight_the_partition_is_released_and_its_next_owner_delivers_again(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("x", 100))
    side.turns(1)
    side.checkpoint()
    side.producer.hold_acks = True
    side.turns(1, advance_ms=200)  # produced, no delivery report yet
    side.consumer.rebalance("revoke", [(DELAY, 0)])
    side.turns(1)  # revoke waits out the grace (200 ms), then closes the partition
    assert (DELAY, 0) not in side.service.partitions.by_key
    side.producer.hold_acks = False
    side.turns(1)  # the late ack changes nothing on the closed partition
    assert len(side.delivered()) == 1
    side.consumer.rebalance("assign", [(DELAY, 0)])
    side.turns(3, advance_ms=200)
    # Its cursor was never marked: the new owner delivers it again (at-least-once).
    assert [h["delay-id"] for h in side.delivered()] == ["x", "x"]
    side.stop()


def test_a_lost_partition_is_closed_without_committing(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("x", 60_000))
    side.turns(1)
    side.consumer.rebalance("lost", [(DELAY, 0)])
    side.turns(1)
    assert (DELAY, 0) not in side.service.partitions.by_key
    assert side.committed(0) is None
    side.stop()


def test_shutdown_drains_flushes_and_commits(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("a", 100))
    side.send(schedule("b", 600_000), partition=1)
    side.turns(2, advance_ms=200)
    side.stop()
    assert side.consumer.closed
    assert side.committed(0) == 1 and side.committed(1) == 1
    assert [h["delay-id"] for h in side.delivered()] == ["a"]
    # The pending message survives in the store of the next run.
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    again.turns(2)
    assert again.service.partitions.by_key[(DELAY, 1)].store.stats().pending == 1
    again.stop()
