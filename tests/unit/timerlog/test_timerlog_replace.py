"""Replace by id at the store (DESIGN §2): a schedule replaces the pending messages with
its id and target topic that were sent before it.

The sidecar turns every schedule with an explicit id into a *replace*: a
:class:`Cancel` with ``replace=True`` sent at the schedule's own time. It follows the
cancel rule, but it is counted apart (``replaced_total``), and one that finds nothing
to replace is not an unknown cancel: most schedules replace nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from delaybridge.timerlog import Cancel, ManualClock, StoreSettings, TimerStore
from tests.unit.timerlog.support import GRACE_MS, START_MS
from tests.unit.timerlog.test_timerlog_cancel_order import delivered, sent


@pytest.fixture
def store(graced_store: TimerStore) -> TimerStore:
    return graced_store


def replace(id: str, sent_ms: int, offset: int | None) -> Cancel:
    return Cancel(id, "orders", sent_ms, offset, replace=True)


def test_a_replace_takes_the_older_message_and_is_counted_as_replaced(
    store: TimerStore, clock: ManualClock
) -> None:
    store.append([sent("order", START_MS, offset=1), sent("order", START_MS + 20, offset=2)])
    assert store.cancel([replace("order", START_MS + 20, offset=2)]) == [True]
    assert delivered(store, clock) == [("order", 2)]
    stats = store.stats()
    assert (stats.replaced_total, stats.cancelled_total) == (1, 0)


def test_a_replace_that_finds_nothing_is_not_an_unknown_cancel(
    store: TimerStore, clock: ManualClock
) -> None:
    store.append([sent("order", START_MS, offset=1)])
    assert store.cancel([replace("order", START_MS, offset=1)]) == [False]  # itself: kept
    clock.advance(GRACE_MS + 1)
    store.flush()
    stats = store.stats()
    assert (stats.unknown_cancels_total, stats.replaced_total, stats.waiting_cancels) == (0, 0, 0)


def test_a_replace_only_takes_messages_for_its_target_topic(
    store: TimerStore, clock: ManualClock
) -> None:
    other = sent("order", START_MS, offset=1)._replace(target_topic="reminders")
    store.append([other, sent("order", START_MS + 5, offset=2)])
    store.cancel([replace("order", START_MS + 10, offset=3)])
    assert delivered(store, clock) == [("order", 1)]


def test_a_waiting_replace_keeps_its_kind_across_a_restart(
    tmp_path: Path, graced: StoreSettings, clock: ManualClock
) -> None:
    with TimerStore.open(tmp_path, graced, clock) as store:
        store.cancel([replace("late", START_MS + 50, offset=None), replace("none", START_MS, None)])
    with TimerStore.open(tmp_path, graced, clock) as store:
        # An older message with the id arrives from a lagging partition: replaced.
        store.append([sent("late", START_MS + 10, offset=8)])
        clock.advance(GRACE_MS + 1)
        store.flush()
        stats = store.stats()
        assert (stats.replaced_total, stats.cancelled_total, stats.unknown_cancels_total) == (
            1,
            0,
            0,
        )
        assert delivered(store, clock) == []
