"""The changelog on the fakes: every store can be rebuilt from Kafka (issue 11).

Replicas here are sidecars with their own data directories on one fake cluster, one
after the other (the fake group hands every partition to the consumer that subscribes).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from confluent_kafka import Message

from delaybridge.timerlog.changelog_record import PROGRESS_KEY, parse_key
from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule

CHANGELOG = "delaybridge-delay-changelog"


def changelog(side: FakeSidecar) -> list[Message]:
    """The changelog's message records (progress records left out)."""
    return [m for m in side.cluster.records(CHANGELOG) if m.key() != PROGRESS_KEY]


def pending_ids(side: FakeSidecar) -> set[str]:
    """Ids of every pending message, read through the admin look-up (one per id)."""
    found = set()
    for part in side.service.partitions:
        for i in range(200):
            for prefix in ("later", "soon"):
                rec = part.store.lookup(f"{prefix}{i}")
                if rec is not None:
                    found.add(rec.id)
    return found


def test_values_and_tombstones_follow_the_store(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("soon0", 100))
    side.send(schedule("later0", 600_000))
    side.turns(2)
    assert changelog(side) == []  # written behind, at the next flush
    side.checkpoint()
    keys = [parse_key(m.key(), "t") for m in changelog(side)]
    assert keys == [(0, 0), (1, 0)]
    side.turns(3, advance_ms=300)  # "soon0" goes out: its key gets a tombstone
    last = changelog(side)[-1]
    assert last.value() is None and parse_key(last.key(), "t") == (0, 0)
    side.stop()


def test_a_message_gone_before_the_next_flush_costs_the_changelog_nothing(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("now0", 0))
    side.send(schedule("later0", 600_000))
    side.send([("delay-cancel", "later0")], partition=1)
    side.turns(4, advance_ms=200)  # delivered and cancelled within one flush interval
    assert [h["delay-id"] for h in side.delivered()] == ["now0"]
    side.checkpoint()
    assert changelog(side) == []  # neither values nor tombstones
    assert side.committed(0) == 2  # and both offsets are safe to commit
    side.stop()


def test_the_offset_commit_waits_for_the_changelog(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.turns(1)
    side.producer.hold_acks = True
    side.send(schedule("later0", 600_000))
    side.turns(1)
    side.checkpoint()
    assert side.committed(0) is None  # stored and flushed, but not in Kafka yet
    side.producer.hold_acks = False
    side.turns(1)
    side.checkpoint()
    assert side.committed(0) == 1
    side.stop()


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
    mark = part.store.marks.changelog
    side.producer.hold_acks = True
    side.send(schedule("soon0", 500))
    side.turns(1)
    side.checkpoint()  # on disk, its value sent but not acknowledged
    side.producer.hold_acks = False
    side.turns(4, advance_ms=200)  # acknowledged, delivered, tombstoned; no flush
    assert part.store.marks.changelog == mark
    assert [h["delay-id"] for h in side.delivered()] == ["soon0"]
    side.kill9(changelog_written=True)
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    again.turns(6, advance_ms=200)
    assert [h["delay-id"] for h in again.delivered()] == ["soon0"]
    again.stop()


def test_values_unacknowledged_at_a_kill_are_written_after_the_restart(tmp_path: Path) -> None:
    """``kill -9`` while the values of messages on disk were unacknowledged (and never
    reached Kafka): the restart on the same disk had them in its store only, wrote them
    nowhere and committed its delay-topic offsets past them (re-read, they were skipped
    as stored), so a disk lost later lost them. Found by ``test_crash_points_fake.py``."""
    side = FakeSidecar(tmp_path / "a")
    side.send(schedule("later0", 600_000))
    for _ in range(2):  # written and acknowledged: the store has a changelog mark
        side.turns(1)
        side.checkpoint()
    side.producer.hold_acks = True
    side.send(schedule("later1", 600_000))
    side.turns(1)
    side.checkpoint()  # on disk; its value sent, never acknowledged
    side.kill9()  # and never written
    again = FakeSidecar(tmp_path / "a", clock=side.clock, cluster=side.cluster)
    for _ in range(3):
        again.turns(1, advance_ms=1_000)
        again.checkpoint()
    again.kill9()
    shutil.rmtree(tmp_path / "a")
    third = FakeSidecar(tmp_path / "b", clock=side.clock, cluster=side.cluster)
    third.turns(4)
    assert pending_ids(third) == {"later0", "later1"}
    third.stop()


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


def test_a_parked_retry_is_one_copy_after_a_restore(tmp_path: Path) -> None:
    a = FakeSidecar(tmp_path / "a", delivery={"missing_topic_retry_ms": 600_000})
    a.send(schedule("soon0", 100, target="not-yet"))
    a.turns(4, advance_ms=400)  # fails and is parked: each time a new copy, generation + 1
    a.checkpoint()
    keys = [(parse_key(m.key(), "t"), m.value() is None) for m in changelog(a)]
    # Parked before any copy was written: only the latest copy is.
    assert len(keys) == 1 and keys[0][0][1] >= 1 and not keys[0][1]
    a.stop()
    a.cluster.create_topic("not-yet")
    b = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster)
    b.turns(6, advance_ms=1_000)
    assert [h["delay-id"] for h in b.delivered("not-yet")] == ["soon0"]
    b.stop()


def test_a_parked_copy_holds_its_offset_until_it_is_in_the_changelog(tmp_path: Path) -> None:
    """A message parked (its target topic missing) before its value was written: the new
    copy was held without a gate and the original's gate released, so the delay-topic
    offset was committed past a copy only this disk held; the disk lost, it was lost."""
    side = FakeSidecar(tmp_path / "a")
    side.send(schedule("p0", 0, target="late"))
    side.turns(4, advance_ms=100)  # fails (no such topic): parked
    side.producer.hold_acks = True  # its value, written at this flush, never arrives
    side.checkpoint()
    assert side.committed(0) in (None, 0)
    side.kill9()
    shutil.rmtree(tmp_path / "a")
    side.cluster.create_topic("late", 2)
    again = FakeSidecar(tmp_path / "b", clock=side.clock, cluster=side.cluster)
    again.turns(10, advance_ms=1_000)
    assert [h["delay-id"] for h in again.delivered("late")] == ["p0"]
    again.stop()


def test_a_store_from_before_the_changelog_is_written_to_it_then_restorable(
    tmp_path: Path,
) -> None:
    old = FakeSidecar(tmp_path / "a", changelog={"enabled": False})
    for i in range(30):
        old.send(schedule(f"later{i}", 600_000), partition=i % 2)
    old.turns(3)
    old.stop()
    assert CHANGELOG not in old.cluster.topics
    upgraded = FakeSidecar(tmp_path / "a", clock=old.clock, cluster=old.cluster)
    upgraded.turns(3)
    assert len(changelog(upgraded)) == 30
    upgraded.checkpoint()
    assert not any(p.store.marks.changelog_seeding for p in upgraded.service.partitions)
    upgraded.stop()
    shutil.rmtree(tmp_path / "a")
    fresh = FakeSidecar(tmp_path / "b", clock=old.clock, cluster=old.cluster)
    fresh.turns(4)
    assert pending_ids(fresh) == {f"later{i}" for i in range(30)}
    fresh.stop()
