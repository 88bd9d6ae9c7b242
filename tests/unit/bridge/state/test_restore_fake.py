"""Restoring a store from its changelog on the fakes: a lost disk, a catch-up, an interruption."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule
from tests.unit.bridge.state.changelog_kit import pending_ids


def test_values_acknowledged_after_the_last_flush_are_not_stored_twice(tmp_path: Path) -> None:
    """``kill -9`` after a flush whose changelog values were not acknowledged yet: the
    store on disk holds the messages, its mark does not cover their values, and the
    catch-up from the mark reads them again. They were stored, and delivered, twice."""
    side = FakeSidecar(tmp_path)
    side.send(schedule("later0", 600_000))
    for _ in range(2):  # written and acknowledged: the store has a changelog mark
        side.turns(1)
        side.checkpoint()
    side.producer.hold_acks = True
    for i in range(1, 4):
        side.send(schedule(f"later{i}", 600_000 + i))
    side.turns(1)
    side.checkpoint()  # on disk, their values sent but not acknowledged
    side.kill9(changelog_written=True)
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    again.turns(4)
    assert again.service.partitions.by_key[(DELAY, 0)].store.stats().pending == 4
    again.turns(4, advance_ms=300_000)
    again.turns(4, advance_ms=300_000)
    assert sorted(h["delay-id"] for h in again.delivered()) == [f"later{i}" for i in range(4)]
    again.stop()


def test_a_message_delivered_after_the_last_flush_is_not_delivered_again(
    tmp_path: Path,
) -> None:
    """Stored before a flush that did not cover its value, delivered and tombstoned after
    it, then ``kill -9``: the store on disk holds it pending, and its value and
    tombstone meet in the catch-up's buffer. They cancelled out and left the store's
    copy, which went out a second time."""
    side = FakeSidecar(tmp_path)
    side.send(schedule("later0", 600_000))
    for _ in range(2):  # written and acknowledged: the store has a changelog mark
        side.turns(1)
        side.checkpoint()
    part = side.service.partitions.by_key[(DELAY, 0)]
    side.producer.hold_acks = True
    side.send(schedule("soon0", 500))
    side.turns(1)
    side.checkpoint()  # on disk, its value sent but not acknowledged
    mark = part.store.marks.changelog
    side.producer.hold_acks = False
    side.turns(4, advance_ms=200)  # acknowledged, delivered, tombstoned; no flush
    assert part.store.marks.changelog == mark
    assert [h["delay-id"] for h in side.delivered()] == ["soon0"]
    side.kill9(changelog_written=True)
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    again.turns(6, advance_ms=200)
    assert [h["delay-id"] for h in again.delivered()] == ["soon0"]
    again.stop()


def test_a_replica_that_lost_its_disk_restores_everything_pending(tmp_path: Path) -> None:
    a = FakeSidecar(tmp_path / "a")
    for i in range(10):
        a.send(schedule(f"soon{i}", 100), partition=i % 2)
    for i in range(50):
        a.send(schedule(f"later{i}", 600_000), partition=i % 2)
    a.turns(3)
    for i in range(5):
        a.send([("delay-cancel", f"later{i}")], partition=1)
    a.turns(4, advance_ms=300)  # the ten due soon are delivered, five cancels applied
    assert len(a.delivered()) == 10
    a.stop()
    shutil.rmtree(tmp_path / "a")  # the node and its disk are gone

    b = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster)
    b.turns(4)
    assert all(p.role.value == "active" for p in b.service.partitions)
    assert pending_ids(b) == {f"later{i}" for i in range(5, 50)}
    b.turns(4, advance_ms=300_000)
    b.turns(4, advance_ms=300_000)
    ids = [h["delay-id"] for h in b.delivered()]
    assert sorted(ids) == sorted(
        [f"soon{i}" for i in range(10)] + [f"later{i}" for i in range(5, 50)]
    )
    b.stop()


def test_a_changelog_consumer_that_cannot_find_a_partition_is_replaced(tmp_path: Path) -> None:
    """After a broker frozen for 45 s, the restore consumer's offsets query for one
    changelog partition blocked 30 s and failed with ``_UNKNOWN_PARTITION``: the worker
    process ended (exit 2), and the supervisor's restart, with new clients, restored
    the partition. Now the restore asks again on a new changelog consumer, and the
    worker stays up."""
    a = FakeSidecar(tmp_path / "a")
    for i in range(20):
        a.send(schedule(f"later{i}", 600_000), partition=i % 2)
    a.turns(3)
    a.stop()
    b = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster)
    restoring = b.service.partitions.restoring
    assert restoring is not None
    stuck = restoring.restorer.consumer

    def unknown(partition: TopicPartition, timeout: float = -1, cached: bool = False) -> Any:
        raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))

    stuck.get_watermark_offsets = unknown  # type: ignore[method-assign]
    b.turns(4)
    assert restoring.restorer.consumer is not stuck
    assert all(p.role.value == "active" for p in b.service.partitions)
    assert pending_ids(b) == {f"later{i}" for i in range(20)}
    b.stop()


def test_an_interrupted_restore_resumes_where_it_stopped(tmp_path: Path) -> None:
    a = FakeSidecar(tmp_path / "a")
    for i in range(150):
        a.send(schedule(f"later{i}", 600_000))
    a.turns(3)
    a.stop()
    small = {"restore_batch_records": 40}
    b = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster, changelog=small)
    b.turns(2)  # two slices of 40, then "killed" (its store keeps what it took)
    part = b.service.partitions.by_key[(DELAY, 0)]
    assert part.role.value == "restoring"
    b.service.partitions.close_all()
    b.consumer.crash()
    c = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster, changelog=small)
    c.turns(1)  # assigned, and one slice of 40 read
    part = c.service.partitions.by_key[(DELAY, 0)]
    task = c.service.partitions.restoring.restorer.tasks[(DELAY, 0)]  # type: ignore[union-attr]
    assert task.position == 120  # it went on from the mark (80), not from the start
    c.turns(5)
    assert part.role.value == "active"
    assert part.store.stats().pending == 150
    c.stop()


def test_a_partition_coming_back_catches_up_with_what_another_replica_did(
    tmp_path: Path,
) -> None:
    a = FakeSidecar(tmp_path / "a")
    for i in range(20):
        a.send(schedule(f"later{i}", 600_000))
    a.turns(3)
    a.stop()
    b = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster)
    b.turns(3)
    for i in range(5):
        b.send([("delay-cancel", f"later{i}")], partition=1)
    for i in range(20, 25):
        b.send(schedule(f"later{i}", 600_000))
    b.turns(4)
    b.stop()
    back = FakeSidecar(tmp_path / "a", clock=a.clock, cluster=a.cluster)  # its old disk
    back.turns(4)
    assert pending_ids(back) == {f"later{i}" for i in range(5, 25)}
    back.stop()
