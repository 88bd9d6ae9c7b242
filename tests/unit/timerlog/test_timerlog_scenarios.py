"""RocketMQ's timer-store scenarios (TimerMessageStoreTest), in Python form."""

from __future__ import annotations

from pathlib import Path

import pytest

from delaybridge.errors import ConfigError
from delaybridge.timerlog import Cancel, ManualClock, StoreSettings, TimerStore
from delaybridge.timerlog.errors import DelayTooLong, InvalidRecord
from tests.unit.timerlog.support import START_MS, drain, rec


def test_put_and_deliver_at_due_time_never_before(store: TimerStore, clock: ManualClock) -> None:
    store.append([rec("a", START_MS + 1_050, offset=1), rec("b", START_MS + 1_000, offset=2)])
    assert store.next_due_ms() == START_MS + 1_000
    clock.advance(999)
    assert drain(store) == []
    clock.advance(1)
    assert [r.id for r in drain(store)] == ["b"]
    clock.advance(50)
    assert drain(store) == []  # due 1,050 rounds up to the 1,100 tick: never early
    clock.advance(50)
    got = drain(store)
    assert [r.id for r in got] == ["a"]
    assert got[0].value == b"v" * 100 and got[0].headers == (("trace", b"1"),)
    assert store.stats().pending == 0 and store.next_due_ms() is None


def test_expired_at_put_is_delivered_within_one_tick(store: TimerStore, clock: ManualClock) -> None:
    clock.advance(10_050)
    assert drain(store) == []  # the reader is now at the clock's tick
    store.append([rec("old", START_MS - 3_600_000, offset=1), rec("now", clock.now_ms(), offset=2)])
    assert store.next_due_ms() == START_MS + 10_100  # the tick after the one being read
    clock.advance(50)
    assert [r.id for r in drain(store)] == ["old", "now"]


def test_delete_before_due(store: TimerStore, clock: ManualClock) -> None:
    store.append([rec("a", START_MS + 2_000, offset=1), rec("b", START_MS + 2_000, offset=2)])
    assert store.cancel([("a", "orders")]) == [True]
    clock.advance(3_000)
    assert [r.id for r in drain(store)] == ["b"]
    assert store.stats().cancelled_total == 1


def test_delete_with_colliding_id_on_other_topic_cancels_nothing(
    store: TimerStore, clock: ManualClock
) -> None:
    store.append([rec("x", START_MS + 500, topic="orders", offset=1)])
    assert store.cancel([("x", "payments")]) == [False]
    clock.advance(1_000)
    assert [r.id for r in drain(store)] == ["x"]
    assert store.stats().unknown_cancels_total == 1


def test_delete_of_unknown_id_is_harmless_and_counted(store: TimerStore) -> None:
    assert store.cancel([("ghost", None), ("ghost2", "orders")]) == [False, False]
    assert store.stats().unknown_cancels_total == 2


def test_cancel_waiting_for_its_message(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    settings = StoreSettings(**{**small.__dict__, "cancel_grace_ms": 5_000})
    sent = START_MS + 500  # the messages below were sent at START_MS: before the cancels
    with TimerStore.open(tmp_path, settings, clock) as store:
        assert store.cancel([Cancel("early", None, sent), Cancel("never", None, sent)]) == [
            False,
            False,
        ]
        assert store.stats().waiting_cancels == 2
        store.flush()
    clock.advance(1_000)
    with TimerStore.open(tmp_path, settings, clock) as store:  # survives a restart
        store.append([rec("early", START_MS + 2_000, offset=1)])
        clock.advance(5_000)
        assert drain(store) == []
        stats = store.stats()
        assert stats.cancelled_total == 1 and stats.unknown_cancels_total == 1
        assert stats.waiting_cancels == 0


def test_roll_of_delay_longer_than_window(
    store: TimerStore, clock: ManualClock, small: StoreSettings
) -> None:
    due = START_MS + 5 * small.window_ms + 123
    store.append([rec("far", due, offset=1)])
    while clock.now_ms() + 700 < due:
        clock.advance(700)
        assert drain(store) == []
    clock.set(due + 77)  # due rounds up to the next tick
    assert [r.id for r in drain(store)] == ["far"]
    assert store.stats().rolled_total >= 4


def test_max_delay_rejection(tmp_path: Path, clock: ManualClock) -> None:
    settings = StoreSettings(tick_ms=100, wheel_slots=64, max_delay_ms=10_000)
    with TimerStore.open(tmp_path, settings, clock) as store:
        with pytest.raises(DelayTooLong, match="max_delay_ms=10000"):
            store.append([rec("ok", START_MS + 5_000), rec("bad", START_MS + 10_001)])
        assert store.stats().appended_total == 0
        store.append([rec("edge", START_MS + 10_000)])
        assert store.stats().pending == 1


def test_state_kept_across_reopen(tmp_path: Path, small: StoreSettings, clock: ManualClock) -> None:
    with TimerStore.open(tmp_path, small, clock) as store:
        store.append([rec(f"m{i}", START_MS + 1_000 * i, offset=i) for i in range(1, 21)])
        store.cancel([("m5", None)])
        clock.advance(3_000)
        assert [r.id for r in drain(store)] == ["m1", "m2", "m3"]
    with TimerStore.open(tmp_path, small, clock) as store:
        assert store.last_source_offset == 20
        assert store.stats().pending == 16
        assert store.lookup("m7") is not None and store.lookup("m5") is None
        clock.advance(30_000)
        assert [r.id for r in drain(store)] == [f"m{i}" for i in range(4, 21) if i != 5]


def test_in_flight_messages_repeat_after_crash_marked_delivered_do_not(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    store = TimerStore.open(tmp_path, small, clock)
    store.append([rec(f"m{i}", START_MS, offset=i) for i in range(6)])
    clock.advance(100)
    first = store.take_due(2)
    store.mark_delivered(first[-1].cursor)
    store.take_due(2)  # in flight, never marked delivered
    store.flush()
    store.abandon()
    with TimerStore.open(tmp_path, small, clock) as store:
        assert [r.id for r in drain(store)] == ["m2", "m3", "m4", "m5"]


def test_unflushed_appends_are_dropped_and_source_offset_says_so(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    store = TimerStore.open(tmp_path, small, clock)
    store.append([rec("a", START_MS + 100, offset=7)])
    store.flush()
    store.append([rec("b", START_MS + 100, offset=8)])
    store.abandon()
    with TimerStore.open(tmp_path, small, clock) as store:
        assert store.last_source_offset == 7
        clock.advance(200)
        assert [r.id for r in drain(store)] == ["a"]


@pytest.mark.parametrize(
    "name,changed", [("tick_ms", {"tick_ms": 50}), ("wheel_slots", {"wheel_slots": 128})]
)
def test_incompatible_geometry_names_the_setting(
    tmp_path: Path, small: StoreSettings, clock: ManualClock, name: str, changed: dict[str, int]
) -> None:
    TimerStore.open(tmp_path, small, clock).close()
    with pytest.raises(ConfigError, match=name):
        TimerStore.open(tmp_path, StoreSettings(**{**small.__dict__, **changed}), clock)
    TimerStore.open(tmp_path, small, clock).close()  # the refusal changed nothing


def test_huge_tick_streams_in_bounded_batches(store: TimerStore, clock: ManualClock) -> None:
    store.append([rec(f"m{i}", START_MS + 100, offset=i) for i in range(5_000)])
    clock.advance(100)
    sizes, ids = [], []
    while batch := store.take_due(700):
        sizes.append(len(batch))
        ids += [d.record.id for d in batch]
        store.mark_delivered(batch[-1].cursor)
    assert max(sizes) == 700 and ids == [f"m{i}" for i in range(5_000)]


def test_segments_are_deleted_once_nothing_pending_references_them(
    store: TimerStore, clock: ManualClock
) -> None:
    for i in range(40):
        store.append([rec(f"m{i}-{j}", START_MS + 1_000, offset=i * 10 + j) for j in range(10)])
    before = store.stats()
    assert before.commit_segments > 3 and before.timer_segments > 3
    clock.advance(1_000)
    assert len(drain(store)) == 400
    store.flush(recompute_live=True)
    after = store.stats()
    assert after.commit_segments == 1 and after.timer_segments == 1
    assert after.bytes_on_disk < before.bytes_on_disk


def test_a_record_too_big_for_its_format_is_refused_whole(store: TimerStore) -> None:
    with pytest.raises(InvalidRecord, match="'x'"):
        store.append([rec("ok", START_MS + 100), rec("x", START_MS + 100, topic="t" * 70_000)])
    assert store.stats().appended_total == 0 and store.commit_log.end == 0


def test_abandon_drops_the_store_like_kill_9(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    store = TimerStore.open(tmp_path, small, clock)
    store.append([rec("kept", START_MS + 500, offset=1)])
    store.flush()
    snapshot = store.stats()
    store.append([rec("lost", START_MS + 500, offset=2)])
    assert snapshot.appended_total == 1, "stats() is a copy of the counters, not a view"
    assert store.counters.appended_total == 2
    store.abandon()
    store.abandon()  # a dropped store ignores a second drop
    with TimerStore.open(tmp_path, small, clock) as again:  # the lock was released
        assert again.wheel_rebuilt, "no clean stamp: the crash path"
        assert again.last_source_offset == 1 and again.counters.appended_total == 1
        clock.advance(600)
        assert [r.id for r in drain(again)] == ["kept"]
