"""Changelog values written behind by age (``changelog.write_behind_ms``), on the fakes.

A value goes out once its message has been stored for ``write_behind_ms``; a message
delivered or cancelled sooner never touches the changelog, and the delay-topic offset
commit waits for the values it needs (rule 1 of ``bridge/state/changelog.py``). A new copy
whose old copy is tombstoned at once (a parked retry) is written at once, so a store
rebuilt from the changelog never holds neither.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from delaybridge.bridge.state import changelog as changelog_module
from delaybridge.timerlog.changelog_record import PROGRESS_KEY, parse_key, record_of
from delaybridge.timerlog.commit_codec import decode
from tests.unit.bridge.sidecar_kit import ORDERS, FakeSidecar, schedule
from tests.unit.bridge.state.changelog_kit import CHANGELOG, changelog, pending_ids

BEHIND = {"write_behind_ms": 5_000}


def test_a_message_gone_within_the_window_never_touches_the_changelog(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, changelog=BEHIND)
    for i in range(3):
        side.send(schedule(f"soon{i}", 2_000))
    side.send(schedule("later0", 600_000), partition=1)
    side.turns(2)
    for _ in range(12):  # 3.6 s: the three are due and delivered, every flush in between
        side.turns(1, advance_ms=300)
        side.checkpoint()
    assert sorted(h["delay-id"] for h in side.delivered()) == ["soon0", "soon1", "soon2"]
    assert changelog(side) == []  # no value, no tombstone for them; later0 still held
    assert side.committed(0) == 3  # delivered: their offsets are safe without a value
    assert side.committed(1) is None  # later0 waits for its value
    side.turns(6, advance_ms=300)  # past 5 s stored
    side.checkpoint()
    side.turns(1)
    side.checkpoint()
    assert [m.value() is not None for m in changelog(side)] == [True]
    assert side.committed(1) == 1
    side.stop()


def test_a_disk_lost_within_the_window_loses_nothing(tmp_path: Path) -> None:
    a = FakeSidecar(tmp_path / "a", changelog=BEHIND)
    for i in range(4):
        a.send(schedule(f"later{i}", 600_000), partition=i % 2)
    a.turns(2, advance_ms=100)
    a.checkpoint()
    assert changelog(a) == [] and a.committed(0) is None  # held, and the commit waits
    a.kill9()
    shutil.rmtree(tmp_path / "a")
    b = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster, changelog=BEHIND)
    b.turns(4)  # re-read from the delay topic: nothing was committed past them
    assert pending_ids(b) == {f"later{i}" for i in range(4)}
    b.stop()


def test_past_the_bound_the_oldest_held_are_written_at_once(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, changelog=BEHIND | {"write_behind_max_records": 5})
    for i in range(8):
        side.send(schedule(f"later{i}", 600_000))
    side.turns(2)
    offsets = [parse_key(m.key(), "t")[0] for m in changelog(side)]
    assert offsets == [0, 1, 2, 3]  # 8 held, over 5: the older half went out
    for i in range(8, 11):
        side.send(schedule(f"later{i}", 600_000))
    side.turns(2)
    offsets = [parse_key(m.key(), "t")[0] for m in changelog(side)]
    assert offsets == [0, 1, 2, 3, 4, 5, 6]  # 7 held: the older 3 of them
    side.stop()


def test_a_parked_copy_survives_a_lost_disk_before_the_next_flush(tmp_path: Path) -> None:
    """The parked copy's value must reach the changelog before the old copy's tombstone:
    held back like a new message's (5 s), a disk lost meanwhile left the rebuilt store
    with neither copy, and the message was gone (its offset committed long ago). Before
    the window it was held until the next flush (200 ms), a narrower gap of the same
    kind."""
    delivery = {"missing_topic_retry_ms": 600_000}
    a = FakeSidecar(tmp_path / "a", delivery=delivery, changelog=BEHIND)
    a.send(schedule("r0", 6_000, target="not-yet"))
    a.turns(2)
    a.clock.advance(5_500)
    a.checkpoint()  # stored 5.5 s ago: its value (generation 0) is written
    a.turns(1)
    a.checkpoint()
    assert a.committed(0) == 1
    a.turns(3, advance_ms=400)  # due: the target is missing, so it is parked
    a.kill9()  # before the next flush
    shutil.rmtree(tmp_path / "a")
    a.cluster.create_topic("not-yet")
    b = FakeSidecar(
        tmp_path / "b", clock=a.clock, cluster=a.cluster, delivery=delivery, changelog=BEHIND
    )
    b.turns(8, advance_ms=1_000)
    assert [h["delay-id"] for h in b.delivered("not-yet")] == ["r0"]
    b.stop()


def test_a_store_whose_messages_all_left_within_the_window_reopens_without_a_rebuild(
    tmp_path: Path,
) -> None:
    """Its changelog holds only progress records, all written by it: their offsets are
    the position its checkpoint remembers. Without that, a restart after kill -9 found
    no mark, took the store for a stranger's and rebuilt it from the changelog (the
    two-worker kill -9 test on a real broker caught it)."""
    side = FakeSidecar(tmp_path / "a", changelog=BEHIND)
    for i in range(4):
        side.send(schedule(f"soon{i}", 1_000))
    side.turns(2)
    for _ in range(10):
        side.turns(1, advance_ms=300)
        side.checkpoint()
    assert len(side.delivered()) == 4 and changelog(side) == []
    store = next(p.store for p in side.service.partitions if p.partition == 0)
    assert store.marks.changelog is not None  # the progress records' position
    side.kill9()
    again = FakeSidecar(tmp_path / "a", clock=side.clock, cluster=side.cluster, changelog=BEHIND)
    again.turns(3)
    assert not list((tmp_path / "a").rglob("*.stale*"))  # reopened, not set aside
    assert len(again.delivered()) == 4
    again.stop()


def test_a_value_written_behind_is_the_stored_record_read_back(tmp_path: Path) -> None:
    """What waits is the record's commit-log position; its bytes are read back when the
    value is written. They must be the record exactly as stored: each value decodes to
    what the store holds, and a store rebuilt from the changelog delivers the messages
    with their keys, values and headers intact (some written by the bound, early, while
    the store kept appending; the rest by age)."""
    a = FakeSidecar(tmp_path / "a", changelog=BEHIND | {"write_behind_max_records": 6})
    sent = {}
    for i in range(10):
        value = f"payload-{i}-".encode() * (i + 1)
        headers = [*schedule(f"later{i}", 60_000), ("trace", f"t{i}")]
        a.send(headers, key=f"k{i}".encode(), value=value, partition=i % 2)
        sent[f"later{i}"] = (f"k{i}".encode(), value, f"t{i}")
        a.turns(1, advance_ms=100)
    a.turns(2, advance_ms=3_000)
    a.checkpoint()
    a.turns(1)
    values = [m.value() for m in changelog(a)]
    assert len(values) == 10 and all(v is not None for v in values)
    stores = [p.store for p in a.service.partitions]
    for raw in values:
        assert raw is not None
        rec = decode(bytes(record_of(raw, "test")), 0, Path("<value>"))
        held = next(s.lookup(rec.id) for s in stores if s.lookup(rec.id) is not None)
        assert rec == held
    a.kill9()
    shutil.rmtree(tmp_path / "a")
    b = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster, changelog=BEHIND)
    b.turns(4)
    b.turns(4, advance_ms=20_000)
    got = {
        h["delay-id"]: (m.key(), m.value(), h["trace"])
        for m, h in zip(b.cluster.records(ORDERS), b.delivered(), strict=True)
    }
    assert got == sent
    b.stop()


def test_values_go_out_in_chunks_not_in_one_burst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Aged values are written ``WRITE_CHUNK`` per partition and flush: a backlog of
    them (a fill faster than the window) does not land in the producer all at once."""
    monkeypatch.setattr(changelog_module, "WRITE_CHUNK", 3)
    side = FakeSidecar(tmp_path, changelog=BEHIND)
    for i in range(8):
        side.send(schedule(f"later{i}", 600_000))
    side.turns(2)
    side.clock.advance(5_500)
    written = []
    for _ in range(4):
        side.checkpoint()
        side.turns(1)
        written.append(len(changelog(side)))
    assert written == [3, 6, 8, 8]
    side.stop()


def test_aged_values_wait_while_deliveries_fill_the_producer(tmp_path: Path) -> None:
    """With ``max_in_flight_records`` in flight (a burst draining), values old enough to
    be written wait for a later flush: a 1M-tick drain otherwise wrote the burst's
    newest values just before delivering them, and paid a tombstone for each."""
    side = FakeSidecar(tmp_path, delivery={"max_in_flight_records": 2}, changelog=BEHIND)
    for i in range(3):
        side.send(schedule(f"later{i}", 600_000))
    side.turns(2)
    side.producer.hold_acks = True  # the broker is slow to answer
    for _ in range(2):  # no id: no replace on the cancel topic, only the deliveries
        side.send([("delay-target-topic", ORDERS), ("delay-ms", "0")], partition=1)
    side.turns(2, advance_ms=100)
    assert len(side.producer) >= 2  # in flight: the producer is full
    side.clock.advance(5_500)
    side.checkpoint()
    values = [q for q in side.producer.queue if q.topic == CHANGELOG and q.key != PROGRESS_KEY]
    assert values == []  # aged, but waiting for room
    side.producer.hold_acks = False
    for _ in range(4):  # room again: two at a time (the bound is 2)
        side.turns(1)
        side.checkpoint()
    side.turns(1)
    assert len(changelog(side)) == 3
    side.stop()
