"""Damaged store files that are only indexes or summaries are repaired at open.

Before issue 10 a truncated or zeroed wheel refused to open (though deleting it rebuilt
it fine), zeroed slots behind an intact header silently lost their messages, and a
missing checkpoint made the store delete every segment it had.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from delaybridge.errors import ConfigError
from delaybridge.fileformat import HEADER_SIZE
from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from tests.unit.timerlog.support import START_MS, drain, rec

IDS = [f"m{i}" for i in range(40)]


def build(directory: Path, settings: StoreSettings, clock: ManualClock) -> None:
    """A cleanly closed store: 40 messages over 4 s, 21 of them delivered."""
    with TimerStore.open(directory, settings, clock) as store:
        store.append([rec(id, START_MS + 100 * i, offset=i) for i, id in enumerate(IDS)])
        clock.advance(2_000)
        assert len(drain(store)) == 21


def rest(directory: Path, settings: StoreSettings, clock: ManualClock) -> list[str]:
    with TimerStore.open(directory, settings, clock) as store:
        clock.advance(5_000)
        return [r.id for r in drain(store)]


@pytest.mark.parametrize("how", ["truncated", "zeroed", "empty", "missing"])
def test_a_damaged_wheel_file_is_made_again_and_rebuilt(
    tmp_path: Path, small: StoreSettings, clock: ManualClock, how: str
) -> None:
    build(tmp_path, small, clock)
    wheel = tmp_path / "wheel"
    size = wheel.stat().st_size
    if how == "truncated":
        os.truncate(wheel, size // 2)
    elif how == "zeroed":
        wheel.write_bytes(bytes(size))
    elif how == "empty":
        wheel.write_bytes(b"")
    else:
        wheel.unlink()
    assert rest(tmp_path, small, clock) == IDS[21:]


def test_zeroed_slots_behind_a_clean_header_are_noticed_and_rebuilt(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    build(tmp_path, small, clock)
    wheel = tmp_path / "wheel"
    raw = wheel.read_bytes()
    wheel.write_bytes(raw[:HEADER_SIZE] + bytes(len(raw) - HEADER_SIZE))  # stamp says clean
    assert rest(tmp_path, small, clock) == IDS[21:]


def test_a_wheel_of_other_geometry_is_still_a_setting_error(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    build(tmp_path, small, clock)
    (tmp_path / "checkpoint").unlink()  # only the wheel's header can tell now
    other = StoreSettings(**{**small.__dict__, "wheel_slots": 128})
    with pytest.raises(ConfigError, match="wheel_slots=128"):
        TimerStore.open(tmp_path, other, clock)
