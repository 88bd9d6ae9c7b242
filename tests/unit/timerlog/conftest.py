"""Fixtures of the store's tests (helpers to import are in :mod:`.support`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from tests.unit.timerlog.support import GRACE_MS, START_MS


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def small() -> StoreSettings:
    """A tiny wheel (64 slots of 100 ms = 6.4 s window) so rolls happen in tests."""
    return StoreSettings(
        tick_ms=100,
        wheel_slots=64,
        commit_segment_bytes=8192,
        timer_segment_entries=64,
        cancel_grace_ms=0,
    )


@pytest.fixture
def store(tmp_path: Path, small: StoreSettings, clock: ManualClock) -> Iterator[TimerStore]:
    s = TimerStore.open(tmp_path / "store", small, clock)
    yield s
    s.close()


@pytest.fixture
def graced(small: StoreSettings) -> StoreSettings:
    """``small`` with a cancel grace period (cancels wait for messages sent before them)."""
    return StoreSettings(**{**small.__dict__, "cancel_grace_ms": GRACE_MS})


@pytest.fixture
def graced_store(tmp_path: Path, graced: StoreSettings, clock: ManualClock) -> Iterator[TimerStore]:
    s = TimerStore.open(tmp_path / "store", graced, clock)
    yield s
    s.close()
