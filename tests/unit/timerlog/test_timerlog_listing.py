"""The paged listing of pending messages against a model (a dict of what is pending).

Proves: a walk page by page lists exactly the pending messages, each once, window part
in due order, rolled ones (due beyond the window) too; filters; the work bound
(partial pages that a cursor completes); resumption across appends, deliveries and
cancels between pages; and the wheel histogram.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delaybridge.timerlog import ManualClock, StoreSettings, TimerRecord, TimerStore
from delaybridge.timerlog.list_cursor import END, START, Cursor, Part, Position
from delaybridge.timerlog.listing import Filter, StorePage, list_pending
from delaybridge.timerlog.pending_stats import histogram
from tests.unit.timerlog.support import START_MS, drain, rec

WINDOW_MS = 6_400  # the ``small`` fixture: 64 slots of 100 ms


def walk(
    store: TimerStore, flt: Filter | None = None, limit: int = 7, budget: int = 20_000
) -> tuple[list[str], list[StorePage]]:
    """Every page from the start to the end; the ids listed, and the pages."""
    after, bound, ids, pages = START, None, [], []
    while True:
        page = list_pending(
            store, "s", after, flt or Filter(), limit, budget=budget, roll_bound=bound
        )
        assert len(page.items) <= limit
        pages.append(page)
        ids += [item.record.id for item in page.items]
        bound = page.roll_bound if page.roll_bound is not None else bound
        if page.next == END:
            return ids, pages
        assert page.next > after  # every page moves on, even an empty partial one
        after = page.next


def fill(store: TimerStore, n: int, spread_ms: int, topics: int = 3) -> dict[str, TimerRecord]:
    records = [
        rec(f"m{i:04d}", START_MS + 1 + (i * 7919) % spread_ms, topic=f"t{i % topics}", offset=i)
        for i in range(n)
    ]
    store.append(records)
    return {r.id: r for r in records}


def test_a_walk_lists_every_pending_message_once_in_due_order(store: TimerStore) -> None:
    model = fill(store, 300, 3 * WINDOW_MS)  # two thirds due beyond the window: rolled
    ids, pages = walk(store)
    assert len(ids) == len(set(ids)) and set(ids) == set(model)
    window = [it for p in pages for it in p.items if it.position.part == Part.WINDOW]
    rolled = [it for p in pages for it in p.items if it.position.part == Part.ROLLED]
    assert window and rolled
    assert all(it.record.due_ms <= START_MS + WINDOW_MS for it in window)
    assert all(it.record.due_ms > START_MS + WINDOW_MS - 100 for it in rolled)
    ticks = [it.position.tick_ms for it in window]
    assert ticks == sorted(ticks)
    assert all(it.position.tick_ms >= it.record.due_ms for it in window)


def test_deliveries_and_rolls_leave_exactly_the_rest(store: TimerStore, clock: ManualClock) -> None:
    model = fill(store, 300, 3 * WINDOW_MS)
    for _ in range(25):  # past a window: rolls copy messages forward
        clock.advance(197)
        for r in drain(store):
            del model[r.id]
    assert store.counters.rolled_total > 0
    ids, _ = walk(store, limit=11)
    assert sorted(ids) == sorted(model)


def test_filters(store: TimerStore, clock: ManualClock) -> None:
    model = fill(store, 200, 2 * WINDOW_MS)
    overdue = rec("late-1", START_MS - 5_000, topic="t0", offset=999)
    store.append([overdue])
    model[overdue.id] = overdue
    lo, hi = START_MS - 10_000, START_MS + 3_000

    def expect(f: Filter) -> set[str]:
        return {
            r.id
            for r in model.values()
            if (f.topic is None or r.target_topic == f.topic)
            and (f.id_prefix is None or r.id.startswith(f.id_prefix))
            and (f.due_from_ms is None or r.due_ms >= f.due_from_ms)
            and (f.due_to_ms is None or r.due_ms < f.due_to_ms)
        }

    for f in (
        Filter(topic="t1"),
        Filter(id_prefix="m01"),
        Filter(id_prefix="late"),
        Filter(due_from_ms=lo, due_to_ms=hi),
        Filter(due_from_ms=START_MS + 9_000),
        Filter(due_to_ms=START_MS + 9_000, topic="t2", id_prefix="m0"),
        Filter(topic="nobody"),
    ):
        ids, _ = walk(store, f)
        assert len(ids) == len(set(ids)) and set(ids) == expect(f), f


def test_the_budget_bounds_a_page_and_the_cursor_completes_it(store: TimerStore) -> None:
    model = fill(store, 400, 3 * WINDOW_MS, topics=40)
    ids, pages = walk(store, Filter(topic="t7"), limit=5, budget=30)
    assert set(ids) == {i for i, r in model.items() if r.target_topic == "t7"}
    assert any(p.partial for p in pages)
    # A page examines its budget plus at most the rest of one slot list.
    assert max(p.examined for p in pages) <= 30
    assert len(pages) > 400 // 30


def test_resumes_across_appends_deliveries_and_cancels(
    store: TimerStore, clock: ManualClock
) -> None:
    model = fill(store, 120, WINDOW_MS - 200)
    first = list_pending(store, "s", START, Filter(), 40)
    seen = [it.record.id for it in first.items]
    last_due = first.items[-1].position.tick_ms
    clock.advance(300)
    delivered = {r.id for r in drain(store)}
    assert delivered and delivered <= set(seen)  # due first, so listed first
    later = [rec(f"n{i}", last_due + 1_000 + i, offset=500 + i) for i in range(5)]
    earlier = rec("early", START_MS + 350, offset=600)  # behind the cursor: not listed
    store.append([*later, earlier])
    victim = next(i for i in sorted(model) if i not in seen and i not in delivered)
    assert store.cancel([(victim, None)]) == [True]
    rest, _ = walk_from(store, first.next)
    assert not set(rest) & set(seen)
    expected = set(model) - set(seen) - {victim} | {r.id for r in later}
    assert set(rest) == expected


def walk_from(store: TimerStore, after: Position) -> tuple[list[str], None]:
    ids: list[str] = []
    while after != END:
        page = list_pending(store, "s", after, Filter(), 9)
        ids += [it.record.id for it in page.items]
        after = page.next
    return ids, None


def test_positions_of_another_store_at_the_same_tick(store: TimerStore) -> None:
    fill(store, 50, 1_000)
    page = list_pending(store, "s", START, Filter(), 100)
    tick = page.items[10].position.tick_ms
    here = [it.record.id for it in page.items if it.position.tick_ms == tick]
    before_me = list_pending(store, "s", Position(0, tick, "r", 1 << 40), Filter(), 100)
    after_me = list_pending(store, "s", Position(0, tick, "z", -1), Filter(), 100)
    assert set(here) <= {it.record.id for it in before_me.items}
    assert not set(here) & {it.record.id for it in after_me.items}


def test_cursor_round_trip() -> None:
    c = Cursor(Position(1, 12_300, "delay-3", 77), {"delay-3": 900}, "abc")
    assert Cursor.decode(c.encode(), "abc") == c


def test_histogram_counts_what_the_wheel_holds(store: TimerStore, clock: ManualClock) -> None:
    store.append([rec(f"a{i}", START_MS + 100 + 20 * i, offset=i) for i in range(100)])
    assert store.cancel([("a5", None)]) == [True]
    h = histogram(store, START_MS)
    assert sum(h.by_minute) == sum(h.by_hour) == 99
    assert h.by_minute[0] == 99


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from("aacdl"), st.integers(-2_000, 3 * WINDOW_MS), st.integers(0, 500)
        ),
        min_size=1,
        max_size=40,
    ),
    limit=st.integers(1, 20),
    budget=st.integers(1, 200),
)
def test_property_walks_agree_with_the_model(
    tmp_path_factory: object,
    small: StoreSettings,
    ops: list[tuple[str, int, int]],
    limit: int,
    budget: int,
) -> None:
    directory = Path(tmp_path_factory.mktemp("listing"))  # type: ignore[attr-defined]
    clock = ManualClock(START_MS)
    store = TimerStore.open(directory / "s", small, clock)
    model: dict[str, TimerRecord] = {}
    n = 0
    try:
        for op, due, k in ops:
            if op == "a":  # append a few
                batch = [
                    rec(f"i{n + j}", clock.now_ms() + due + j, topic=f"t{j % 2}", offset=n + j)
                    for j in range(1 + k % 5)
                ]
                n += len(batch)
                store.append(batch)
                model.update((r.id, r) for r in batch)
            elif op == "c" and model:  # cancel one
                victim = sorted(model)[k % len(model)]
                assert store.cancel([(victim, None)]) == [True]
                del model[victim]
            elif op == "d":  # time passes, due messages go out
                clock.advance(k * 3)
                for r in drain(store):
                    del model[r.id]
            else:  # a walk, with changes between its pages
                _walk_while_changing(store, clock, model, limit, budget, k)
        ids, _ = walk(store, limit=limit, budget=budget)
        assert len(ids) == len(set(ids)) and set(ids) == set(model)
    finally:
        store.close()


_WALK_IDS = itertools.count()


def _walk_while_changing(
    store: TimerStore,
    clock: ManualClock,
    model: dict[str, TimerRecord],
    limit: int,
    budget: int,
    seed: int,
) -> None:
    at_start = set(model)
    ever = set(model)
    rolled_before = store.counters.rolled_total
    after, bound, ids, turn = START, None, [], 0
    while after != END:
        page = list_pending(store, "s", after, Filter(), limit, budget=budget, roll_bound=bound)
        ids += [it.record.id for it in page.items]
        bound = page.roll_bound if page.roll_bound is not None else bound
        after = page.next
        turn += 1
        if turn % 3 == 0:  # the store changes between pages
            # Unique ids: two walks of one example may share a seed (the model is by id).
            r = rec(f"w{next(_WALK_IDS)}", clock.now_ms() + (seed * turn) % WINDOW_MS, offset=turn)
            store.append([r])
            model[r.id] = r
            ever.add(r.id)
            clock.advance(seed % 40)
            for d in drain(store):
                del model[d.id]
    assert len(ids) == len(set(ids))  # never twice
    assert set(ids) <= ever
    if store.counters.rolled_total == rolled_before:  # nothing moved under the walk
        assert at_start & set(model) <= set(ids)


def test_a_message_rolled_again_during_the_walk_is_not_listed_twice(
    store: TimerStore, clock: ManualClock
) -> None:
    """Due three windows ahead: a ROLL entry at the window's edge, copied to a new ROLL
    entry when reached. The copy is made after the walk entered the rolled part."""
    store.append([rec(f"far{i}", START_MS + 3 * WINDOW_MS + i, offset=i) for i in range(10)])
    first = list_pending(store, "s", START, Filter(), 4)
    assert [it.position.part for it in first.items] == [Part.ROLLED] * 4
    clock.advance(WINDOW_MS)
    assert drain(store) == [] and store.counters.rolled_total == 10
    rest, bound = [], first.roll_bound
    after = first.next
    while after != END:
        page = list_pending(store, "s", after, Filter(), 4, roll_bound=bound)
        rest += [it.record.id for it in page.items]
        after = page.next
    assert not set(rest) & {it.record.id for it in first.items}
