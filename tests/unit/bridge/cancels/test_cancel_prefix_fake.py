"""Cancel by id prefix through the Kafka edge (issue 27): ``delay-cancel-prefix`` in one
delay-topic partition takes the matching messages of every store, only those sent
before it, and a prefix matching more than the cap is dead-lettered instead."""

from __future__ import annotations

from pathlib import Path

from delaybridge.connectors import header_text
from tests.unit.bridge.sidecar_kit import DELAY, DLT, FakeSidecar, schedule


def delivered_ids(side: FakeSidecar) -> list[str]:
    return sorted(h["delay-id"] for h in side.delivered())


def test_a_prefix_cancel_in_one_partition_takes_the_other_partitions_messages(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    for n in range(6):  # both partitions hold tenant-a messages
        side.send(schedule(f"tenant-a/{n}", 5_000), partition=n % 2)
    side.send(schedule("tenant-b/1", 5_000), partition=1)
    side.turns(2)
    side.clock.advance(10)
    side.send([("delay-cancel-prefix", "tenant-a/")], partition=1)
    side.turns(3)
    side.clock.advance(10)
    side.send(schedule("tenant-a/late", 1_000), partition=0)  # sent after the cancel
    side.turns(3)
    side.turns(3, advance_ms=3_000)
    side.turns(3, advance_ms=3_000)
    assert delivered_ids(side) == ["tenant-a/late", "tenant-b/1"]
    cancelled = sum(p.store.stats().cancelled_total for p in side.service.partitions)
    assert cancelled == 6
    assert [h.key() for h in side.cancels()] == [b"tenant-a/"]
    side.stop()


def test_a_prefix_cancel_over_the_cap_is_dead_lettered_and_cancels_nothing(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path, cancels={"prefix_confirm_above": 3})
    for n in range(4):
        side.send(schedule(f"bulk-{n}", 2_000), partition=n % 2)
    side.turns(2)
    side.clock.advance(10)
    side.send([("delay-cancel-prefix", "bulk-")], partition=0)
    side.send([("delay-cancel-prefix", "bulk-1")], partition=0)  # one match: under the cap
    side.turns(3)
    side.turns(3, advance_ms=3_000)
    assert delivered_ids(side) == ["bulk-0", "bulk-2", "bulk-3"]
    dead = [header_text(m) for m in side.cluster.records(DLT)]
    assert [(d["delay-error"], d["delay-cancel-prefix"]) for d in dead] == [
        ("prefix-over-cap", "bulk-")
    ]
    assert "prefix_confirm_above" in dead[0]["delay-error-detail"]
    assert [h.key() for h in side.cancels()] == [b"bulk-1"]  # never published
    side.stop()


def test_an_empty_prefix_is_dead_lettered_naming_the_header(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("keep", 1_000))
    side.send([("delay-cancel-prefix", "")])
    side.turns(3)
    side.turns(3, advance_ms=2_000)
    assert delivered_ids(side) == ["keep"]
    dead = [header_text(m) for m in side.cluster.records(DLT)]
    assert dead[0]["delay-error"] == "bad-header"
    assert "delay-cancel-prefix" in dead[0]["delay-error-detail"]
    side.stop()


def test_the_changelog_forgets_what_a_prefix_cancel_took(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("gone-1", 5_000))
    side.send(schedule("kept-1", 5_000))
    side.turns(2)
    side.checkpoint()
    side.clock.advance(10)
    side.send([("delay-cancel-prefix", "gone-")], partition=1)
    side.turns(3)
    side.checkpoint()
    changelog = [
        m for t in side.cluster.topics if t.endswith("-changelog") for m in side.cluster.records(t)
    ]
    tombstones = [m.key() for m in changelog if m.value() is None]
    assert len(tombstones) == 1
    assert side.service.partitions.by_key[(DELAY, 0)].store.lookup("gone-1") is None
    side.stop()


def test_the_count_is_paced_and_what_falls_due_meanwhile_waits_for_it(tmp_path: Path) -> None:
    # 4 entries per turn: the count of 40 messages takes turns. Meanwhile the record's
    # offset is not committed, nothing is published, and its partition's cancel horizon
    # stays at the record: the messages falling due wait for the decision, then go.
    side = FakeSidecar(tmp_path, cancels={"prefix_sweep_entries": 4})
    due_ms = side.clock.now_ms() + 300
    for n in range(40):
        side.send(schedule(f"p-{n:02d}", 300), partition=n % 2)
    side.turns(2)
    side.checkpoint()
    side.clock.advance(10)
    offset = side.send([("delay-cancel-prefix", "p-")], partition=1)
    side.turns(1)
    checks = side.service.prefix_checks
    assert checks.held() == {(DELAY, 1): offset}
    assert side.cancels() == []
    turns = 1
    while checks.held():
        side.turns(1, advance_ms=50)  # their due time passes meanwhile
        side.checkpoint()
        committed = side.committed(1)
        if checks.held():  # still counting: the record is not committed past
            assert committed is None or committed <= offset
            assert side.delivered() == [] and side.cancels() == []
        turns += 1
        assert turns < 100
    assert turns > 3  # paced: more than one turn
    assert side.clock.now_ms() > due_ms  # they fell due while it was counted
    side.turns(3, advance_ms=1_000)
    assert side.delivered() == []
    assert [m.key() for m in side.cancels()] == [b"p-"]
    side.stop()
