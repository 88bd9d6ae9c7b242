"""An offset commit the broker refused is sent again, even when nothing new arrived.

Commits are asynchronous; one refused during a rebalance (a worker joining the group
while records arrive: ``REBALANCE_IN_PROGRESS``, ``ILLEGAL_GENERATION``) used to be
forgotten: the tracker had taken the position, so the next flush found nothing new to
commit, and once traffic stopped the group's offset stayed behind for good (found with
two workers starting under load: ``tests/integration/sidecar/test_workers.py``).
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError, TopicPartition

from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule


def test_a_refused_commit_is_sent_again_at_the_next_flush(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    offset = side.send(schedule("a", 60_000))
    side.turns(2)
    side.checkpoint()
    assert side.committed(0) == offset + 1
    # The broker refused that commit: its result reports the error, the offset is old.
    side.cluster.committed[("delaybridge", DELAY, 0)] = 0
    refused = TopicPartition(DELAY, 0, offset + 1)
    side.consumer.config["on_commit"](KafkaError(KafkaError.REBALANCE_IN_PROGRESS), [refused])
    side.turns(1)
    side.checkpoint()
    assert side.committed(0) == offset + 1, "the refused commit was not sent again"


def test_a_commit_of_a_partition_no_longer_owned_is_ignored(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    gone = TopicPartition("elsewhere", 7, 5)
    side.consumer.config["on_commit"](KafkaError(KafkaError.ILLEGAL_GENERATION), [gone])
    side.consumer.config["on_commit"](None, [TopicPartition(DELAY, 0, 1)])  # success
    side.checkpoint()
