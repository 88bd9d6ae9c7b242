"""An idle store's flushes: time passing is written at most every ``IDLE_CHECKPOINT_MS``.

With nothing stored, delivered or cancelled, every flush (every 200 ms in the sidecar)
still found a checkpoint that differed from the last one: the delivery cursor had moved
over empty ticks, and the owner's changelog mark over its own progress records. Each
was written with two fsyncs: the larger part of an idle worker's CPU (issue 26: idle
≤ 1 % of a core). Such a checkpoint now waits; anything else is written at once.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from delaybridge.timerlog.checkpoint import Checkpoint
from delaybridge.timerlog.durability import IDLE_CHECKPOINT_MS
from delaybridge.timerlog.marks import StoreMarks
from tests.unit.timerlog.support import START_MS, drain, rec

FLUSH_MS = 200


def counted_saves(monkeypatch: pytest.MonkeyPatch) -> list[Checkpoint]:
    saves: list[Checkpoint] = []
    real = Checkpoint.save

    def save(self: Checkpoint, directory: Path) -> None:
        saves.append(self)
        real(self, directory)

    monkeypatch.setattr(Checkpoint, "save", save)
    return saves


def idle_flushes(store: TimerStore, clock: ManualClock, n: int, marks: StoreMarks) -> None:
    for _ in range(n):
        clock.advance(FLUSH_MS)
        assert drain(store) == []
        store.flush(marks)


def test_an_idle_store_writes_time_passing_at_most_every_idle_interval(
    store: TimerStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    saves = counted_saves(monkeypatch)
    marks = StoreMarks(source_resume=2, changelog=10)
    store.append([rec("a", START_MS + 1_000, offset=1)])
    store.flush(marks)
    assert len(saves) == 1
    clock.advance(1_000)
    assert [r.id for r in drain(store)] == ["a"]
    store.flush(marks)
    assert len(saves) == 2  # a delivery is written at once
    quiet = IDLE_CHECKPOINT_MS // FLUSH_MS - 1
    for i in range(quiet):  # the owner's progress records move its changelog mark
        marks = dataclasses.replace(marks, changelog=11 + i)
        idle_flushes(store, clock, 1, marks)
    assert len(saves) == 2
    assert store.marks.changelog == 10  # the marks of the checkpoint on disk
    idle_flushes(store, clock, 1, marks)
    assert len(saves) == 3
    assert saves[-1].done_tick_ms > saves[1].done_tick_ms
    assert store.marks == marks


@pytest.mark.parametrize(
    "change",
    [
        "append",
        "cancel",
        "source_resume",
        "changelog_unacked",
        "first_changelog_mark",
    ],
)
def test_anything_but_time_passing_is_written_at_once(
    store: TimerStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    marks = StoreMarks(source_resume=2, changelog=None if change.startswith("first") else 10)
    store.append([rec("a", START_MS + 60_000, offset=1)])
    store.flush(marks)
    idle_flushes(store, clock, 3, marks)
    saves = counted_saves(monkeypatch)
    if change == "append":
        store.append([rec("b", START_MS + 60_000, offset=2)])
    elif change == "cancel":
        store.cancel([("a", None)])
    elif change == "source_resume":
        marks = dataclasses.replace(marks, source_resume=3)
    elif change == "changelog_unacked":
        marks = dataclasses.replace(marks, changelog_unacked=5)
    else:  # without a mark, a restart takes the store for a stranger's and rebuilds it
        marks = dataclasses.replace(marks, changelog=3)
    clock.advance(FLUSH_MS)
    store.flush(marks)
    assert len(saves) == 1


def test_a_crash_after_quiet_flushes_reopens_at_the_older_cursor_and_loses_nothing(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    store = TimerStore.open(tmp_path / "s", small, clock)
    store.append([rec("a", START_MS + 1_000, offset=1), rec("b", START_MS + 30_000, offset=2)])
    store.flush()
    clock.advance(1_000)
    assert [r.id for r in drain(store)] == ["a"]
    store.flush()
    idle_flushes(store, clock, 20, store.marks)  # 4 s of empty ticks, not written
    store.abandon()  # kill -9
    again = TimerStore.open(tmp_path / "s", small, clock)
    assert drain(again) == []  # 'a' is not delivered twice
    clock.advance(30_000)
    assert [r.id for r in drain(again)] == ["b"]
    again.close()


def test_a_close_writes_time_passing_at_once(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    store = TimerStore.open(tmp_path / "s", small, clock)
    store.append([rec("a", START_MS + 60_000, offset=1)])
    store.flush()
    idle_flushes(store, clock, 5, store.marks)
    done = store.reader.done
    before = Checkpoint.load(tmp_path / "s")
    assert before is not None and before.done_tick_ms < done.tick_ms  # waiting
    store.close()
    after = Checkpoint.load(tmp_path / "s")
    assert after is not None and after.done_tick_ms == done.tick_ms
