"""take_due builds its batch with the cyclic collector paused (timerlog/gc_pause.py).

A collection inside take_due finds the whole batch still referenced and promotes it
(10-15 % of delivery's CPU at 10M pending): these tests fail if a collection can run
while a batch is built, if the collector is left off afterwards (even after an error),
or if an application's own ``gc.disable()`` is undone.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from delaybridge.timerlog import ManualClock, TimerStore
from delaybridge.timerlog.gc_pause import without_gc
from tests.unit.timerlog.support import START_MS, drain, rec


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """Generations collected while the test runs, with a collection every allocation."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    old = gc.get_threshold()
    gc.callbacks.append(note)
    gc.set_threshold(1)
    try:
        yield seen
    finally:
        gc.set_threshold(*old)
        gc.callbacks.remove(note)


def test_take_due_runs_no_collection(
    store: TimerStore, clock: ManualClock, collections: list[int]
) -> None:
    store.append([rec(f"m-{i}", START_MS + 1_000, offset=i) for i in range(300)])
    clock.advance(2_000)
    collections.clear()
    got = store.take_due(1000)
    assert len(got) == 300
    assert collections == []  # with the collector on, threshold 1 collects many times
    assert gc.isenabled()
    store.mark_delivered(got[-1].cursor)
    assert drain(store) == []


def test_collector_comes_back_after_an_error(collections: list[int]) -> None:
    @without_gc
    def fails() -> None:
        assert not gc.isenabled()
        raise OSError("disk")

    with pytest.raises(OSError, match="disk"):
        fails()
    assert gc.isenabled()


def test_an_application_that_disabled_the_collector_keeps_it_off() -> None:
    @without_gc
    def noop() -> int:
        return 7

    gc.disable()
    try:
        assert noop() == 7
        assert not gc.isenabled()
    finally:
        gc.enable()
