"""Delivery failures: retries wait in the store, the cursor moves on, nothing is dropped.

Before issue 10 a record retried for a missing topic froze its partition's cursor for
the whole retry time while delivery went on up to half the wheel ahead, holding every
later record in memory; a broker down longer than ``message.timeout.ms`` sent records
to the dead-letter topic instead of out late; a dead letter too large for its topic was
retried forever; and a fatal producer error left the sidecar "healthy".
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError

from tests.unit.bridge.sidecar_kit import DELAY, DLT, ORDERS, FakeSidecar, schedule


def test_a_missing_target_waits_in_the_store_while_the_cursor_moves_on(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, delivery={"missing_topic_retry_ms": 60_000})
    due_ms = side.clock.now_ms() + 100
    side.send(schedule("lost", 100, target="no-such-topic"))
    for i in range(5):
        side.send(schedule(f"ok{i}", 100))
    side.turns(4, advance_ms=200)
    assert [h["delay-id"] for h in side.delivered()] == [f"ok{i}" for i in range(5)]
    part = side.service.partitions.by_key[(DELAY, 0)]
    assert part.pipeline.unmarked == 0  # nothing waits in memory for the missing topic
    assert part.store.stats().pending == 1
    side.checkpoint()
    side.service.shutdown()
    # A restart delivers none of the five again: their cursor was marked and flushed.
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    side.cluster.create_topic("no-such-topic")
    again.turns(4, advance_ms=1_000)
    assert [h["delay-id"] for h in again.delivered()] == [f"ok{i}" for i in range(5)]
    assert [h["delay-id"] for h in again.delivered("no-such-topic")] == ["lost"]
    (lost,) = again.delivered("no-such-topic")
    assert "delaybridge-retry" not in lost
    assert lost["delay-due-ms"] == str(due_ms)  # its own due time, not the retry's
    again.stop()


def test_a_broker_outage_longer_than_the_message_timeout_is_retried_not_dead_lettered(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("m", 100))
    side.turns(1)
    side.producer.fail_next(ORDERS, KafkaError._MSG_TIMED_OUT, times=4)
    side.turns(12, advance_ms=2_000)
    assert side.cluster.records(DLT) == []
    assert [h["delay-id"] for h in side.delivered()] == ["m"]
    side.stop()


def test_retryable_failures_are_dead_lettered_after_the_retry_ceiling(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, delivery={"retry_unavailable_ms": 5_000})
    side.send(schedule("m", 100))
    side.turns(1)
    side.producer.fail_next(ORDERS, KafkaError.NOT_ENOUGH_REPLICAS, times=1_000)
    side.turns(12, advance_ms=2_000)
    (dead,) = side.cluster.records(DLT)
    assert dict(dead.headers() or [])["delay-error"] == b"target-unavailable"
    side.stop()


def test_a_dead_letter_too_large_for_its_topic_is_written_without_its_value(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("big", 100), value=b"v" * 1000)
    side.turns(1)
    side.producer.refuse_next(ORDERS, KafkaError.MSG_SIZE_TOO_LARGE)
    side.producer.fail_next(DLT, KafkaError.MSG_SIZE_TOO_LARGE)
    side.turns(4, advance_ms=200)
    (dead,) = side.cluster.records(DLT)
    headers = dict(dead.headers() or [])
    assert dead.value() is None
    assert headers["delay-error-value-dropped"] == b"1000"
    assert headers["delay-error"] == b"record-too-large"
    assert headers["delay-id"] == b"big"
    side.stop()


def test_records_waiting_for_acks_stay_within_the_in_flight_bound(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, delivery={"max_in_flight_records": 50, "batch_max_records": 20})
    for _ in range(500):  # no ids: no replaces on the cancel topic, only deliveries
        side.send([("delay-target-topic", ORDERS), ("delay-ms", "100")])
    side.turns(30)  # read through, 20 a turn: the cancel horizon then lets them go
    side.producer.hold_acks = True  # no delivery report comes back
    side.turns(20, advance_ms=200)
    part = side.service.partitions.by_key[(DELAY, 0)]
    deliveries = [q for q in side.producer.queue if q.topic == ORDERS]
    assert 0 < len(deliveries) <= 50
    assert part.pipeline.unmarked <= 50
    side.producer.hold_acks = False
    side.turns(40)
    assert len(side.delivered()) == 500
    side.stop()


def test_a_fatal_producer_error_makes_the_sidecar_unhealthy_and_stop(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    assert side.service.control.healthy()
    error_cb = side.producer.config["error_cb"]
    error_cb(KafkaError(KafkaError._FATAL, "out of order sequence", fatal=True))
    assert not side.service.control.healthy()
    assert side.service._stop.is_set()
    side.stop()
