"""The changelog on the fakes: every store can be rebuilt from Kafka (issue 11).

Replicas here are sidecars with their own data directories on one fake cluster, one
after the other (the fake group hands every partition to the consumer that subscribes).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from delaybridge.timerlog.changelog_record import parse_key
from tests.unit.bridge.sidecar_kit import FakeSidecar, schedule
from tests.unit.bridge.state.changelog_kit import changelog


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
