"""Helpers shared by the store's tests: records, stores, and simulated crashes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from delaybridge.timerlog import ManualClock, StoreSettings, TimerRecord, TimerStore

START_MS = 1_700_000_000_000


def rec(id: str, due_ms: int, *, topic: str = "orders", offset: int = 0,
        value: bytes | None = b"v" * 100, key: bytes | None = b"k",
        headers: tuple[tuple[str, bytes | None], ...] = (("trace", b"1"),),
        partition: int = -1) -> TimerRecord:
    return TimerRecord(id, due_ms, topic, partition, key, value, headers, offset, START_MS)


def crash(store: TimerStore) -> None:
    """Drop a store like kill -9 would: no flush, no clean stamp, descriptors closed."""
    for part in (store.commit, store.timer, store.cancels, store.wheel):
        part.close()
    os.close(store._lock_fd)
    store._closed = True


def drain(store: TimerStore, batch: int = 1000) -> list[TimerRecord]:
    """Take and commit everything due now."""
    out: list[TimerRecord] = []
    while True:
        got = store.take_due(batch)
        if not got:
            return out
        out += [d.record for d in got]
        store.commit_delivered(got[-1].cursor)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def small() -> StoreSettings:
    """A tiny wheel (64 slots of 100 ms = 6.4 s window) so rolls happen in tests."""
    return StoreSettings(tick_ms=100, wheel_slots=64, commit_segment_bytes=8192,
                         timer_segment_entries=64, cancel_grace_ms=0)


@pytest.fixture
def store(tmp_path: Path, small: StoreSettings, clock: ManualClock) -> Iterator[TimerStore]:
    s = TimerStore.open(tmp_path / "store", small, clock)
    yield s
    s.close()
