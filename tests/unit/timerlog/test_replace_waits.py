"""The shared table of waiting replaces (``timerlog/replace_waits.py``) and a store that
waits on it: what a waiting replace costs, and that it still takes exactly what the
cancel rule says (the id, the target topic, sent before it, within the grace)."""

from __future__ import annotations

import tracemalloc
import zlib
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from delaybridge.timerlog import Cancel, ManualClock, StoreSettings, TimerStore
from delaybridge.timerlog.replace_waits import CHUNK_MIN, ReplaceWaits, store_view
from tests.unit.timerlog.support import GRACE_MS, START_MS
from tests.unit.timerlog.test_timerlog_cancel_order import delivered, sent

OWN = ("delay", 1)
KEEP_MS = 3 * GRACE_MS


def hashes(*ids: str) -> np.ndarray:
    return np.array([zlib.crc32(i.encode()) for i in ids], np.uint32)


def test_a_waiting_replace_costs_bytes_not_objects() -> None:
    waits = ReplaceWaits(GRACE_MS, KEEP_MS)
    n = 50_000
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        waits.add(f"order-{i:08d}", "orders", START_MS, ("delay", 1), i, START_MS)
    per = (tracemalloc.get_traced_memory()[0] - before) / n
    tracemalloc.stop()
    assert len(waits) == n
    assert per < 100, per  # each store's cancel book kept ~500 B of objects per replace


def test_lookups_find_rows_in_sealed_and_open_chunks_and_confirm_the_id() -> None:
    waits = ReplaceWaits(GRACE_MS, KEEP_MS)
    for i in range(CHUNK_MIN + 10):  # one sealed chunk and an open one
        waits.add(f"id-{i}", "orders", START_MS + i, None, None, START_MS)
    waits.add("plumless", "orders", START_MS, None, None, START_MS)
    found = waits.lookup(hashes("id-3", "nope", f"id-{CHUNK_MIN + 5}", "buckeroo"), START_MS, 0)
    assert sorted(found) == [0, 2, 3]
    assert [w.id for w in found[0]] == ["id-3"] and found[0][0].sent_ms == START_MS + 3
    assert [w.id for w in found[3]] == ["plumless"]  # same CRC-32: a candidate only...
    with_collision = Cancel("plumless", "orders", START_MS + 1, None, True)
    assert not with_collision.applies_to(sent("buckeroo", START_MS, offset=1))  # ...not taken


def test_rows_wait_their_grace_then_are_dropped_after_the_keep_window() -> None:
    waits = ReplaceWaits(GRACE_MS, KEEP_MS)
    for i in range(CHUNK_MIN):
        waits.add(f"id-{i}", "orders", START_MS, None, None, START_MS)
    assert waits.lookup(hashes("id-1"), START_MS + GRACE_MS - 1, 0)
    assert not waits.lookup(hashes("id-1"), START_MS + GRACE_MS, 0)  # grace over
    # A store opened later waits its own grace on what was read in the keep window.
    opened = START_MS + KEEP_MS - 1
    waits.attach(opened)
    assert waits.lookup(hashes("id-1"), opened + GRACE_MS - 1, opened)
    assert not waits.lookup(hashes("id-1"), opened + GRACE_MS, opened)
    waits.drop(opened + GRACE_MS - 1)
    assert len(waits) == CHUNK_MIN  # held for that store
    waits.drop(opened + GRACE_MS)
    assert len(waits) == 0
    assert waits.recent(opened + GRACE_MS) == []


def test_replayed_rows_wait_but_are_not_applied_to_stores_opened_later() -> None:
    # Read again after a restart: the stores held before the crash applied them already.
    waits = ReplaceWaits(GRACE_MS, KEEP_MS)
    waits.add("old", "orders", START_MS, None, None, START_MS, replayed=True)
    waits.add("new", "orders", START_MS, None, None, START_MS)
    assert sorted(waits.lookup(hashes("old", "new"), START_MS, START_MS)) == [0, 1]
    assert [w.id for w in waits.recent(START_MS)] == ["new"]


def test_the_tie_rule_as_each_store_sees_a_replace() -> None:
    assert store_view(100, ("delay", 0), 7, ("delay", 0)) == (100, 7)  # its partition
    assert store_view(100, ("delay", 0), 7, ("delay", 1)) == (99, None)  # loses the tie
    assert store_view(100, ("delay", 1), 7, ("delay", 0)) == (100, None)  # wins it
    assert store_view(100, None, None, ("delay", 0)) == (100, None)  # no origin: wins


def test_a_store_sharing_the_table_keeps_no_wait_of_its_own(
    tmp_path: Path, graced: StoreSettings, clock: ManualClock
) -> None:
    waits = ReplaceWaits(GRACE_MS, KEEP_MS)
    with TimerStore.open(tmp_path, graced, clock) as store:
        store.share_replace_waits(waits, OWN)
        now = clock.now_ms()
        replace = Cancel("late", "orders", now, None, True)
        waits.add("late", "orders", now, ("delay", 1), None, now)
        assert store.cancel([replace]) == [False]
        assert store.stats().waiting_cancels == 0 and store.cancels.end == 0
        # Older copies arrive from a lagging partition; a newer one and another
        # topic's are untouched.
        store.append([sent("late", now - 5, offset=3), sent("late", now + 5, offset=4)])
        store.append([sent("late", now - 5, offset=5)._replace(target_topic="reminders")])
        assert store.stats().replaced_total == 1
        assert sorted(delivered(store, clock)) == [("late", 4), ("late", 5)]


def test_append_raw_reads_the_records_a_waiting_replace_may_take(
    tmp_path: Path, graced: StoreSettings, clock: ManualClock
) -> None:
    # Records restored from a changelog arrive encoded: the hit is read back to confirm.
    waits = ReplaceWaits(GRACE_MS, KEEP_MS)
    with TimerStore.open(tmp_path / "a", graced, clock) as source:
        raws = source.append([sent("x", START_MS - 5, offset=1), sent("y", START_MS, 2)]).records()
    with TimerStore.open(tmp_path / "b", graced, clock) as store:
        store.share_replace_waits(waits, OWN)
        waits.add("x", "orders", START_MS, ("delay", 1), None, clock.now_ms())
        store.append_raw(list(raws))
        assert delivered(store, clock) == [("y", 2)]


Op = tuple[str, str, int, int, int, str]
OPS = st.lists(
    st.tuples(
        st.sampled_from(["append", "replace"]),
        st.sampled_from(["a", "plumless", "buckeroo"]),  # the last two: one CRC-32
        st.integers(0, 2),  # sent, ms after START_MS: ties are common
        st.integers(0, 2),  # a replace's origin partition (1: this store's)
        st.integers(0, 12),  # a replace's origin offset
        st.sampled_from(["orders", "orders", "reminders"]),
    ),
    max_size=30,
)


def _outcome(tmp: Path, graced: StoreSettings, ops: list[Op], shared: bool) -> list[object]:
    clock = ManualClock(START_MS)
    waits = ReplaceWaits(GRACE_MS, KEEP_MS)
    for i in range(CHUNK_MIN + 1):  # a sealed chunk, so both halves of the table serve
        waits.add(f"filler-{i}", "orders", START_MS, None, None, START_MS)
    with TimerStore.open(tmp, graced, clock) as store:
        if shared:
            store.share_replace_waits(waits, OWN)
        for n, (kind, id, sent_ms, partition, offset, topic) in enumerate(ops):
            if kind == "append":
                store.append([sent(id, START_MS + sent_ms, offset=n)._replace(target_topic=topic)])
                continue
            origin = ("delay", partition)
            at, off = store_view(START_MS + sent_ms, origin, offset, OWN)
            if shared:
                waits.add(id, topic, START_MS + sent_ms, origin, offset, clock.now_ms())
            store.cancel([Cancel(id, topic, at, off, True)])
        replaced = store.stats().replaced_total
        return [sorted(delivered(store, clock)), replaced]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
@example(ops=[("replace", "a", 0, 1, 0, "orders"), ("append", "a", 0, 0, 0, "orders")])
@example(ops=[("replace", "a", 0, 0, 0, "orders"), ("append", "a", 0, 0, 0, "orders")])
@example(ops=[("replace", "a", 0, 2, 0, "orders"), ("append", "a", 0, 0, 0, "orders")])
def test_the_shared_table_takes_exactly_what_each_store_s_cancel_book_took(
    tmp_path: Path, graced: StoreSettings, ops: list[Op]
) -> None:
    # The same appends and replaces (within the grace), once with the replaces waiting
    # in the store's cancel book (before) and once in the shared table: the same
    # messages delivered, the same number replaced.
    run = tmp_path / str(len(list(tmp_path.iterdir())))
    assert _outcome(run / "book", graced, ops, False) == _outcome(run / "table", graced, ops, True)
