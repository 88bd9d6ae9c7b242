"""Cancel by id prefix in a store (issue 27): a paced sweep of the timer log, the same
sent-before rule as a cancel by id, and no delivery of a message the sweep has not
reached yet (``timerlog/prefix_sweep.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delaybridge.timerlog import Cancel, ManualClock, StoreSettings, TimerRecord, TimerStore
from delaybridge.timerlog.prefix_sweep import prefix_rows
from tests.unit.timerlog.support import GRACE_MS, START_MS, drain


def sent(
    id: str, sent_ms: int, offset: int, due_ms: int = START_MS + 2_000, topic: str = "orders"
) -> TimerRecord:
    return TimerRecord(id, due_ms, topic, -1, b"k", b"v", (), offset, sent_ms)


def sweep_all(store: TimerStore, budget: int = 7) -> int:
    taken = 0
    while store.sweeping:
        taken += store.sweep(budget)
    return taken


def test_a_sweep_takes_the_ids_with_the_prefix_sent_before_it(
    graced_store: TimerStore, clock: ManualClock
) -> None:
    store = graced_store
    store.append(
        [
            sent("tenant-a-1", START_MS, 1),
            sent("tenant-a-2", START_MS + 5, 2),
            sent("tenant-b-1", START_MS, 3),
            sent("tenant-a-3", START_MS + 50, 4),  # sent after the cancel
            sent("tenant-a", START_MS, 5, topic="invoices"),
        ]
    )
    cancel = Cancel("tenant-a", None, START_MS + 10, prefix=True)
    assert store.count_prefix(cancel) == 3
    assert store.cancel([cancel]) == [False]  # the sweep counts, not the call
    assert store.sweeping
    assert sweep_all(store) == 3
    clock.advance(3_000)
    assert sorted(r.id for r in drain(store)) == ["tenant-a-3", "tenant-b-1"]
    assert store.stats().cancelled_total == 3


def test_a_prefix_cancel_naming_a_topic_takes_only_that_topic(graced_store: TimerStore) -> None:
    store = graced_store
    store.append([sent("t-1", START_MS, 1), sent("t-2", START_MS, 2, topic="invoices")])
    cancel = Cancel("t-", "invoices", START_MS + 10, prefix=True)
    assert store.count_prefix(cancel) == 1
    store.cancel([cancel])
    assert sweep_all(store) == 1
    assert store.lookup("t-1") is not None and store.lookup("t-2") is None


def test_the_count_stops_past_the_cap(graced_store: TimerStore) -> None:
    store = graced_store
    store.append([sent(f"x-{n}", START_MS, n) for n in range(50)])
    cancel = Cancel("x-", None, START_MS + 1, prefix=True)
    assert store.count_prefix(cancel) == 50
    assert 10 < store.count_prefix(cancel, cap=10) <= 50


def test_what_falls_due_before_the_sweep_reaches_it_is_not_delivered(
    graced_store: TimerStore, clock: ManualClock
) -> None:
    # A budget of 1 entry per step: the message due now is far from the sweep's cursor.
    store = graced_store
    store.append([sent(f"p-{n}", START_MS, n, due_ms=START_MS + 3_000 - n) for n in range(20)])
    store.append([sent("q-1", START_MS, 99, due_ms=START_MS + 100)])
    store.cancel([Cancel("p-", None, START_MS + 10, prefix=True)])
    store.sweep(1)
    assert store.sweeping
    clock.advance(5_000)
    assert [r.id for r in drain(store)] == ["q-1"]
    assert store.stats().cancelled_total == 20
    assert store.stats().pending == 0


def test_a_message_arriving_later_but_sent_before_meets_the_waiting_cancel(
    graced_store: TimerStore, clock: ManualClock
) -> None:
    store = graced_store
    store.cancel([Cancel("late-", None, START_MS + 100, prefix=True)])
    sweep_all(store)
    clock.advance(GRACE_MS // 2)
    store.append([sent("late-1", START_MS + 50, 1), sent("late-2", START_MS + 200, 2)])
    clock.advance(3_000)
    assert [r.id for r in drain(store)] == ["late-2"]
    clock.advance(GRACE_MS)
    store.flush()
    assert store.stats().unknown_cancels_total == 0  # a prefix cancel is never "unknown"


def test_a_restart_mid_sweep_sweeps_again(
    tmp_path: Path, graced: StoreSettings, clock: ManualClock
) -> None:
    store = TimerStore.open(tmp_path / "s", graced, clock)
    store.append([sent(f"r-{n}", START_MS, n) for n in range(30)])
    store.cancel([Cancel("r-", None, START_MS + 10, prefix=True)])
    store.sweep(5)
    store.flush()
    store.abandon()
    store = TimerStore.open(tmp_path / "s", graced, clock)
    try:
        assert store.sweeping
        sweep_all(store)
        clock.advance(3_000)
        assert drain(store) == []
    finally:
        store.close()


def test_prefix_rows_reads_ids_of_both_layouts(graced_store: TimerStore) -> None:
    store = graced_store
    wide = "w-" + "x" * 300  # over 255 bytes: the wide layout
    enc = store.append([sent("c-1", START_MS, 1), sent(wide, START_MS, 2), sent("c", START_MS, 3)])
    assert enc.positions is not None
    assert prefix_rows(store.commit_log, enc.positions, b"c-").tolist() == [0]
    assert prefix_rows(store.commit_log, enc.positions, b"w-x").tolist() == [1]
    assert prefix_rows(store.commit_log, enc.positions, b"c").tolist() == [0, 2]


IDS = st.sampled_from(["a", "ab", "abc", "abd", "b", "ba", "bab", "x"])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    messages=st.lists(st.tuples(IDS, st.integers(0, 40)), min_size=1, max_size=40),
    prefix=st.sampled_from(["a", "ab", "b", "ba", "x", "z"]),
    cancel_ms=st.integers(0, 40),
    budget=st.integers(1, 50),
)
def test_exactly_the_ids_with_the_prefix_sent_before_the_cancel_are_removed(
    tmp_path: Path,
    graced: StoreSettings,
    messages: list[tuple[str, int]],
    prefix: str,
    cancel_ms: int,
    budget: int,
) -> None:
    # The model: a message goes unless its id starts with the prefix and it was sent
    # before the cancel (different partitions: an equal timestamp goes to the cancel).
    clock = ManualClock(START_MS)
    directory = tmp_path / "prop"
    shutil.rmtree(directory, ignore_errors=True)
    store = TimerStore.open(directory, graced, clock)
    try:
        records = [
            sent(f"{id}-{n}", START_MS + at, n, due_ms=START_MS + 1_000 + 37 * n % 2_000)
            for n, (id, at) in enumerate(messages)
        ]
        store.append(records)
        cancel = Cancel(prefix, None, START_MS + cancel_ms, prefix=True)
        expected_gone = {
            r.id
            for r in records
            if r.id.startswith(prefix) and r.source_timestamp_ms <= START_MS + cancel_ms
        }
        assert store.count_prefix(cancel) == len(expected_gone)
        store.cancel([cancel])
        while store.sweeping:
            store.sweep(budget)
        clock.advance(5_000)
        delivered = {r.id for r in drain(store)}
        assert delivered == {r.id for r in records} - expected_gone
        assert store.stats().cancelled_total == len(expected_gone)
    finally:
        store.close()


def test_the_same_prefix_cancel_applied_twice_sweeps_once(graced_store: TimerStore) -> None:
    # Ingest applies it at once; the cancel feed brings it back from the cancel topic.
    store = graced_store
    store.append([sent(f"d-{n}", START_MS, n) for n in range(10)])
    cancel = Cancel("d-", None, START_MS + 10, prefix=True)
    store.cancel([cancel])
    store.cancel([cancel])
    assert len(store._matcher.sweeps.running) == 1
    assert store.stats().waiting_cancels == 1
    assert sweep_all(store) == 10
    store.cancel([cancel])  # after its sweep, while it waits: nothing to do again
    assert not store.sweeping
