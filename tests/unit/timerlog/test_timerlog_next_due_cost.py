"""The read lag gauge and the loop's wake-up must not scan the whole wheel.

``stats()`` runs for every store at every checkpoint (200 ms). When the reader is caught
up and nothing is due ahead (a drained store still taking past-due records: the e2e
throughput run), finding "the next due tick" meant scanning every slot of the one-day
wheel again after every window the reader loaded: 17 % of the sidecar in py-spy. The
gauge and the wake-up only need to know what is due up to now (or the next tick), so
they look no further.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from delaybridge.wheel.wheel import TimingWheel
from tests.unit.timerlog.support import START_MS, drain, rec

SLOTS = 100_000


@pytest.fixture
def wide(tmp_path: Path, clock: ManualClock) -> Iterator[TimerStore]:
    settings = StoreSettings(tick_ms=100, wheel_slots=SLOTS, cancel_grace_ms=0)
    s = TimerStore.open(tmp_path / "store", settings, clock)
    yield s
    s.close()


def _count_scanned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    scanned = [0]
    real = TimingWheel.scan

    def counting(self: TimingWheel, from_ms: int, to_ms: int, limit: int = 8192):  # type: ignore[no-untyped-def]
        found = real(self, from_ms, to_ms, limit)
        scanned[0] += (found.scanned_to - from_ms) // self.tick_ms + 1
        return found

    monkeypatch.setattr(TimingWheel, "scan", counting)
    return scanned


def test_stats_of_a_caught_up_store_scan_a_few_slots(
    wide: TimerStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    scanned = _count_scanned(monkeypatch)
    for i in range(20):
        wide.append([rec(f"m{i}", clock.now_ms() - 1_000, offset=i)])
        clock.advance(100)  # a past-due record waits for the next tick
        assert [r.id for r in drain(wide)] == [f"m{i}"]
        scanned[0] = 0
        stats = wide.stats()
        assert stats.read_lag_ms == 0 and stats.pending == 0
        assert scanned[0] <= 10, f"stats() scanned {scanned[0]} wheel slots"
        clock.advance(200)


def test_a_bounded_question_still_sees_what_is_due(wide: TimerStore, clock: ManualClock) -> None:
    wide.append(
        [rec("late", START_MS - 5_000, offset=1), rec("far", START_MS + 3_600_000, offset=2)]
    )
    assert wide.next_due_ms(until_ms=START_MS + 100) is not None
    clock.advance(300)
    assert wide.stats().read_lag_ms > 0  # "late" is due and not taken
    assert [r.id for r in drain(wide)] == ["late"]
    assert wide.next_due_ms(until_ms=START_MS + 100) is None  # nothing due before the horizon
    assert wide.next_due_ms() == START_MS + 3_600_000  # the unbounded question still finds it
    clock.advance(3_600_000)
    assert wide.next_due_ms(until_ms=clock.now_ms()) == START_MS + 3_600_000
    assert wide.stats().read_lag_ms == 300
    assert [r.id for r in drain(wide)] == ["far"]
