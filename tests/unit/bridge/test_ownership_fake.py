"""The owned partitions on the fakes: revoked mid-flight, lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule


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


def test_a_lost_partition_records_the_acks_of_its_deliveries_and_delivers_nothing_twice(
    tmp_path: Path,
) -> None:
    # Kafka away longer than the session: the group takes the partition while two
    # deliveries wait for their reports; Kafka back: the reports come, then the
    # partition comes back to this replica, which must not deliver them again.
    side = FakeSidecar(tmp_path)
    side.send(schedule("x", 100))
    side.send(schedule("y", 100))
    side.turns(1)
    side.checkpoint()
    side.producer.hold_acks = True
    side.turns(1, advance_ms=200)  # both produced; no delivery report: Kafka is away
    side.consumer.rebalance("lost", [(DELAY, 0)])
    side.turns(1)
    assert (DELAY, 0) not in side.service.partitions.by_key
    side.producer.hold_acks = False  # Kafka is back: the reports of both come
    side.turns(1)
    side.checkpoint()
    side.consumer.rebalance("assign", [(DELAY, 0)])
    side.turns(3, advance_ms=200)
    assert [h["delay-id"] for h in side.delivered()] == ["x", "y"]
    side.stop()


def test_a_lost_partition_is_flushed_with_its_acks_once_its_reports_are_in(
    tmp_path: Path,
) -> None:
    # The partition does not come back before a restart on the same disk: the acks
    # that came after the session was lost are on disk, nothing goes out twice.
    side = FakeSidecar(tmp_path)
    side.send(schedule("x", 100))
    side.turns(1)
    side.checkpoint()
    side.producer.hold_acks = True
    side.turns(1, advance_ms=200)
    side.consumer.rebalance("lost", [(DELAY, 0)])
    side.turns(1)
    side.producer.hold_acks = False
    side.turns(1)
    side.checkpoint()  # the lost partition's report is in: flushed and released
    side.kill9()
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    again.turns(3, advance_ms=200)
    assert [h["delay-id"] for h in again.delivered()] == ["x"]
    again.stop()


FENCED = "Static consumer fenced by other consumer with same group.instance.id"


@pytest.mark.parametrize("how", ["consume", "error_cb"])
def test_a_fenced_group_consumer_is_replaced_and_delivery_goes_on(tmp_path: Path, how: str) -> None:
    # A static member whose session expired (the broker frozen) can be fenced by its
    # own rejoin: librdkafka then raises a fatal consumer error and the consumer is dead.
    # The sidecar builds a new one, which takes the partitions back, instead of leaving
    # them unowned with /healthz still 200. librdkafka hands a consumer its fatal error
    # as a consumed message whose code is _FATAL (confluent-kafka's fatal() says False
    # there) and calls no error callback: seen in test_kafka_outage (frozen), where the
    # consumer was dead, the partitions unowned, 1,350 messages never delivered. A
    # fatal error through the error callback (fatal() True) is replaced the same way.
    side = FakeSidecar(tmp_path)
    side.send(schedule("x", 1_000))
    side.turns(2)
    fenced = side.consumer
    if how == "consume":
        fenced.fail(KafkaError(KafkaError._FATAL, f"Fatal error: Broker: {FENCED}"))
    else:
        fenced.config["error_cb"](KafkaError(KafkaError._FATAL, FENCED, fatal=True))
    side.turns(3)
    assert side.service.consumer is not fenced and fenced.closed
    assert side.service.control.healthy()
    side.turns(3, advance_ms=1_000)
    assert [h["delay-id"] for h in side.delivered()] == ["x"]
    side.stop()
