"""A dead-letter topic that refuses writes for a while: ingest stops, memory stays bounded.

A dead letter of bad input is kept in memory (value and all) until Kafka acknowledges
it, and retried with backoff; the partition's offset commit waits for it. Flow control
counted only what sat in the producer's queue, not the writes waiting for their next
try, so while the dead-letter topic refused writes every further bad record added one
more to memory, without bound. Now those count towards ``max_delivery_backlog``: ingest
pauses, and resumes by itself once the topic takes writes again; and
``delaybridge_side_writes_unacked`` shows them (docs/operations.md, "A stuck
dead-letter topic").
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError

from tests.unit.bridge.sidecar_kit import DLT, FakeSidecar, schedule

BACKLOG = 20


def unacked(side: FakeSidecar) -> float:
    """The gauge an operator watches (docs/operations.md)."""
    registry = side.service.metrics.registry
    value = registry.get_sample_value("delaybridge_side_writes_unacked")
    assert value is not None
    return value


def test_bad_input_while_the_dead_letter_topic_refuses_pauses_ingest(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, max_delivery_backlog=BACKLOG)
    side.turns(1)
    side.producer.fail_next(DLT, KafkaError.TOPIC_AUTHORIZATION_FAILED, times=10**6)
    bad = [("delay-target-topic", "orders"), ("delay-ms", "--5")]
    for _ in range(BACKLOG + 10):
        side.send(bad)
    side.turns(2)
    side.checkpoint()
    assert side.service.flow.backpressure, "30 dead letters waiting, the bound is 20"
    assert unacked(side) == BACKLOG + 10
    for _ in range(100):
        side.send(bad)
    side.send(schedule("good", 1))
    side.turns(5, advance_ms=1_000)
    side.checkpoint()
    waiting = len(side.service.retries) + sum(q.topic == DLT for q in side.producer.queue)
    assert waiting <= BACKLOG + 10, f"{waiting} dead letters held in memory"
    assert side.committed(0) in (None, 0)

    side.producer._fail.clear()  # the topic takes writes again
    for _ in range(4):
        side.turns(3, advance_ms=30_000)
        side.checkpoint()
    assert not side.service.flow.backpressure
    assert unacked(side) == 0
    assert len(side.cluster.records(DLT)) == BACKLOG + 10 + 100
    assert side.committed(0) == BACKLOG + 10 + 100 + 1
    assert [h["delay-id"] for h in side.delivered()] == ["good"]
    side.stop()
