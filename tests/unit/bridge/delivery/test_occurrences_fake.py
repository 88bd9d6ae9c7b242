"""Recurring schedules on the fake sidecar: occurrences, crashes, cancels, moves.

The crash tests hold the first occurrence's acknowledgement back, checkpoint (so the
spawned next occurrence is on disk while the first is not marked delivered), and kill
the sidecar like ``kill -9``: the restart delivers the first occurrence again, and
without the spawn guard (``bridge/delivery/occurrences.py``) spawned its successor a second
time, so every later occurrence came twice.
"""

from __future__ import annotations

import shutil
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from delaybridge.bridge.delivery.occurrences import Spawner
from delaybridge.connectors import header_text
from delaybridge.timerlog import ManualClock
from tests.unit.bridge.commit.test_exactly_once_fake import kill, txn_producer
from tests.unit.bridge.sidecar_kit import DELAY, ORDERS, FakeSidecar, schedule

PARIS = ZoneInfo("Europe/Paris")


def every(id: str, interval: str, count: int | None = None) -> list[tuple[str, str]]:
    headers = [("delay-target-topic", ORDERS), ("delay-every", interval), ("delay-id", id)]
    return headers + ([("delay-count", str(count))] if count is not None else [])


def occurrences(side: FakeSidecar, id: str = "s") -> list[tuple[int, int]]:
    """(delay-occurrence, delay-due-ms) of every delivered record of series ``id``."""
    return sorted(
        (int(h["delay-occurrence"]), int(h["delay-due-ms"]))
        for h in side.delivered()
        if h["delay-id"] == id
    )


def run(side: FakeSidecar, ms: int, step_ms: int = 250) -> None:
    for _ in range(ms // step_ms):
        side.turns(1, advance_ms=step_ms)


def spawner(side: FakeSidecar) -> Spawner:
    return side.service.deliverer.series


def test_every_2s_count_5_delivers_5_occurrences_on_time(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    t0 = side.clock.now_ms()
    side.send(every("s", "2s", 5))
    run(side, 15_000)
    assert occurrences(side) == [(k, t0 + 2_000 * k) for k in range(1, 6)]
    for record in side.cluster.records(ORDERS):
        headers = header_text(record)
        due = int(headers["delay-due-ms"])
        assert due <= record.timestamp()[1] <= due + 250  # never early, within a step
        names = [h[0] for h in record.headers() or []]
        assert "delaybridge-series" not in names and names.count("delay-occurrence") == 1
    assert spawner(side).spawned == 4 and spawner(side).ended == 1
    assert side.service.partitions.by_key[(DELAY, 0)].store.pending_by_topic.get(ORDERS, 0) == 0
    side.stop()


def crash_after_spawning(data_dir: Path, *, marked: bool = False, **kw: Any) -> FakeSidecar:
    """Occurrence 1 produced but never acknowledged, occurrence 2 flushed (and in the
    changelog, when there is one); kill -9. ``marked``: a message stored before has
    given the store a changelog mark, so a restart on the same disk catches up from it."""
    side = FakeSidecar(data_dir, **kw)
    if marked:
        side.send(every("early", "1h", 1))
        for _ in range(2):
            side.turns(1)
            side.checkpoint()
        assert side.service.partitions.by_key[(DELAY, 0)].store.marks.changelog is not None
    side.send(every("s", "2s", 4))
    side.turns(1)
    side.producer.hold_acks = True
    run(side, 2_250)
    assert spawner(side).spawned == 1
    side.checkpoint()  # occurrence 2 is durable; occurrence 1 is not marked delivered
    side.kill9(changelog_written=True)
    return side


def test_a_redelivered_occurrence_spawns_no_second_successor(tmp_path: Path) -> None:
    side = crash_after_spawning(tmp_path, changelog={"enabled": False})
    t0 = side.clock.now_ms() - 2_250
    again = FakeSidecar(
        tmp_path, clock=side.clock, cluster=side.cluster, changelog={"enabled": False}
    )
    run(again, 12_000)
    got = Counter(k for k, _ in occurrences(again))
    assert got == Counter({1: 1, 2: 1, 3: 1, 4: 1})  # at-least-once: 1 may come twice
    assert occurrences(again)[-1] == (4, t0 + 8_000)
    assert spawner(again).already_spawned == 1
    again.stop()


def test_a_restart_on_its_own_disk_catches_up_without_a_second_copy(tmp_path: Path) -> None:
    """The flushed store holds occurrence 2, whose changelog value was acknowledged only
    after that flush: the catch-up from the store's mark reads it again and must not
    store a second copy (it did: occurrences 2, 3 and 4 then came twice)."""
    side = crash_after_spawning(tmp_path, marked=True)
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    run(again, 12_000)
    assert Counter(k for k, _ in occurrences(again)) == Counter({1: 1, 2: 1, 3: 1, 4: 1})
    again.stop()


def test_an_occurrence_and_its_successor_due_in_one_turn_spawn_once(tmp_path: Path) -> None:
    """After ``kill -9`` the store holds occurrence 1 again (its delivery not marked) and
    the catch-up brings occurrence 2 back from the changelog; down long enough, both are
    due in the restart's first turn. Occurrence 2 is then taken, not pending, when the
    guard asks the store about occurrence 1: it spawned a second occurrence 2."""
    side = FakeSidecar(tmp_path)
    side.send(every("early", "1h", 1))
    side.send(every("s", "2s", 4))
    for _ in range(3):  # occurrence 1 stored, its value acknowledged: a changelog mark
        side.turns(1)
        side.checkpoint()
    side.producer.hold_acks = True
    run(side, 2_250)  # occurrence 1 out (never acknowledged), occurrence 2 spawned
    assert spawner(side).spawned == 1
    side.kill9(changelog_written=True)
    side.clock.advance(2_500)  # down until occurrence 2 is due as well
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    run(again, 12_000)
    assert Counter(k for k, _ in occurrences(again)) == Counter({1: 1, 2: 1, 3: 1, 4: 1})
    assert spawner(again).already_spawned == 1
    again.stop()


@pytest.mark.parametrize("lose_disk", [False, True], ids=["own disk", "disk lost"])
def test_a_first_occurrence_in_flight_at_a_kill_is_not_lost(
    tmp_path: Path, lose_disk: bool
) -> None:
    """Occurrence 1 is taken before its value was written behind, occurrence 2 is written
    at once, and ``kill -9`` comes before occurrence 1's acknowledgement and any flush.
    The store rebuilt from the changelog held occurrence 2 only, and the delay-topic
    record was skipped when re-read (occurrence 2's key names its offset): occurrence 1
    was never delivered. Found by ``test_crash_points_fake.py``."""
    side = FakeSidecar(tmp_path / "a", changelog={"write_behind_ms": 60_000})
    side.send(every("s", "2s", 4))
    side.turns(1)
    side.producer.hold_acks = True
    run(side, 2_250)  # occurrence 1 out, never acknowledged; occurrence 2 spawned
    assert spawner(side).spawned == 1
    side.kill9(changelog_written=True)
    if lose_disk:
        shutil.rmtree(tmp_path / "a")
    again = FakeSidecar(tmp_path / "a", clock=side.clock, cluster=side.cluster)
    run(again, 12_000)
    assert Counter(k for k, _ in occurrences(again)) == Counter({1: 1, 2: 1, 3: 1, 4: 1})
    again.stop()


def test_a_message_in_flight_before_a_series_is_not_lost(tmp_path: Path) -> None:
    """A message due at once goes out (never acknowledged) in the turn that spawns a
    series' next occurrence, then ``kill -9``: the changelog named the series' offset,
    above the message's, whose value was still held; the store rebuilt from it skipped
    the message when re-read. Found by ``test_crash_points_fake.py``."""
    side = FakeSidecar(tmp_path / "a")
    side.send(schedule("now0", 0))
    side.send(every("s", "2s", 2))
    side.turns(1)  # stored, values held (written behind)
    side.producer.hold_acks = True
    side.turns(1, advance_ms=2_100)  # both taken; occurrence 2 written at once
    side.kill9(changelog_written=True)
    again = FakeSidecar(tmp_path / "a", clock=side.clock, cluster=side.cluster)
    run(again, 6_000)
    assert Counter(h["delay-id"] for h in again.delivered()) == Counter({"now0": 1, "s": 2})
    again.stop()


def test_the_guard_also_holds_when_the_store_is_rebuilt_from_the_changelog(
    tmp_path: Path,
) -> None:
    side = crash_after_spawning(tmp_path / "a")
    shutil.rmtree(tmp_path / "a")  # the disk is gone too: occurrence 2 is in the changelog
    again = FakeSidecar(tmp_path / "b", clock=side.clock, cluster=side.cluster)
    run(again, 12_000)
    assert Counter(k for k, _ in occurrences(again)) == Counter({1: 1, 2: 1, 3: 1, 4: 1})
    assert spawner(again).already_spawned == 1
    again.stop()


def test_a_series_moves_with_its_partition(tmp_path: Path) -> None:
    a = FakeSidecar(tmp_path / "a")
    t0 = a.clock.now_ms()
    a.send(every("s", "2s", 6))
    run(a, 4_500)  # occurrences 1 and 2 delivered, 3 pending
    a.checkpoint()
    a.stop()
    shutil.rmtree(tmp_path / "a")
    b = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster)
    run(b, 10_000)
    assert occurrences(b) == [(k, t0 + 2_000 * k) for k in range(1, 7)]
    b.stop()


def test_a_cancel_stops_the_series_at_whichever_occurrence_is_pending(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(every("s", "2s"))  # no end
    side.send(every("other", "2s", 10), partition=1)
    run(side, 6_500)  # occurrences 1-3 delivered
    side.send([("delay-cancel", "s")], partition=1)  # from another partition
    run(side, 10_000)
    assert [k for k, _ in occurrences(side)] == [1, 2, 3]
    assert [k for k, _ in occurrences(side, "other")] == list(range(1, 9))
    side.stop()


def test_a_re_sent_series_after_its_cancel_runs_again(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(every("s", "2s"))
    run(side, 2_500)
    side.send([("delay-cancel", "s")])
    side.turns(2, advance_ms=10)
    side.send(every("s", "2s", 2))  # sent after the cancel: untouched by it
    run(side, 6_000)
    assert [k for k, _ in occurrences(side)] == [1, 1, 2]
    side.stop()


def test_occurrences_missed_beyond_the_threshold_are_skipped(tmp_path: Path) -> None:
    misfire = {"series_misfire_ms": 3_000}
    side = FakeSidecar(tmp_path, delivery=misfire)
    t0 = side.clock.now_ms()
    side.send(every("s", "1s", 20))
    side.turns(2)
    side.stop()
    side.clock.advance(10_500)  # down for 10.5 s: occurrences 1-10 missed
    back = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster, delivery=misfire)
    run(back, 12_000)
    got = occurrences(back)
    # 1 is delivered (stored: never dropped); 2-7 are more than 3 s late: skipped;
    # 8-10 are caught up at once, then the series goes on at its rate
    assert got == [(1, t0 + 1_000)] + [(k, t0 + 1_000 * k) for k in range(8, 21)]
    back.stop()


def test_exactly_once_a_series_survives_aborts_and_kills_once(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, delivery={"exactly_once": True})
    t0 = side.clock.now_ms()
    side.send(every("s", "2s", 5))
    for _ in range(3):
        run(side, 2_000)
        side.checkpoint()
    run(side, 1_000)  # occurrence 4 delivered (not committed) and 5 spawned
    txn_producer(side).fail_commit_next(abortable=True)
    side.checkpoint()  # aborted: 4 is pending again, 5 never existed
    run(side, 500)
    kill(side)
    again = FakeSidecar(
        tmp_path, clock=side.clock, cluster=side.cluster, delivery={"exactly_once": True}
    )
    for _ in range(6):
        run(again, 1_000)
        again.checkpoint()
    assert occurrences(again) == [(k, t0 + 2_000 * k) for k in range(1, 6)]
    again.stop()


def run_through(side: FakeSidecar, end_ms: int) -> None:
    """Advance the injected clock from due time to due time (plus one tick) until
    ``end_ms``: hours of wall time in a few hundred turns, each delivery at its tick."""
    side.turns(2)  # ingest what was sent
    while side.clock.now_ms() < end_ms:
        dues = [p.store.next_due_ms() for p in side.service.partitions]
        nxt = min([d for d in dues if d is not None] + [end_ms])
        side.clock.set(max(nxt + 100, side.clock.now_ms() + 100))
        side.turns(2)


@pytest.mark.parametrize(
    ("day", "fixed", "hourly"),
    [
        (  # 30 March 2025, spring-forward: 02:00 CET becomes 03:00 CEST
            datetime(2025, 3, 30, tzinfo=PARIS),
            ["2025-03-29T01:30Z", "2025-03-30T01:00Z", "2025-03-31T00:30Z"],  # 02:30 -> 03:00
            ["2025-03-30T00:00Z", "2025-03-30T01:00Z", "2025-03-30T02:00Z"],  # 01, 03, 04 h
        ),
        (  # 26 October 2025, fall-back: 03:00 CEST becomes 02:00 CET
            datetime(2025, 10, 26, tzinfo=PARIS),
            ["2025-10-25T00:30Z", "2025-10-26T00:30Z", "2025-10-27T01:30Z"],  # once that day
            ["2025-10-25T23:00Z", "2025-10-26T00:00Z", "2025-10-26T01:00Z", "2025-10-26T02:00Z"],
        ),
    ],
    ids=["spring-forward", "fall-back"],
)
def test_a_paris_cron_series_fires_at_the_right_instants_over_dst(
    tmp_path: Path, day: datetime, fixed: list[str], hourly: list[str]
) -> None:
    clock = ManualClock(int((day - timedelta(days=1, hours=12)).timestamp() * 1000))
    side = FakeSidecar(tmp_path, clock=clock, store={"wheel_slots": 65_536})  # 1.8 h window
    paris = [("delay-timezone", "Europe/Paris"), ("delay-target-topic", ORDERS)]
    side.send([("delay-cron", "30 2 * * *"), ("delay-id", "fixed"), *paris])
    side.send([("delay-cron", "0 * * * *"), ("delay-id", "hourly"), *paris], partition=1)
    run_through(side, int((day + timedelta(days=1, hours=12)).timestamp() * 1000))

    def instants(id: str) -> list[int]:
        return [due for _, due in occurrences(side, id)]

    assert [utc_ms(t) for t in fixed] == instants("fixed")
    wanted = [utc_ms(t) for t in hourly]
    assert [d for d in instants("hourly") if wanted[0] <= d <= wanted[-1]] == wanted
    for record in side.cluster.records(ORDERS):  # each at its instant, within the tick
        due = int(header_text(record)["delay-due-ms"])
        assert due <= record.timestamp()[1] <= due + 200
    side.stop()


def utc_ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)
