"""The on-disk wheel: linking batches, stale slots, scanning, rebuild, geometry checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delaybridge.errors import ConfigError, IntegrityError
from delaybridge.wheel import EMPTY_LIST, SlotList, TimingWheel

TICK = 100


def arr(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def test_link_threads_each_tick_through_its_previous_entry(tmp_path: Path) -> None:
    wheel = TimingWheel(tmp_path / "wheel", TICK, 16)
    prev = wheel.link(arr(300, 500, 300, 300), arr(0, 1, 2, 3))
    assert prev.tolist() == [-1, -1, 0, 2]
    assert wheel.list_of(300) == SlotList(length=3, first=0, last=3)
    assert wheel.list_of(500) == SlotList(1, 1, 1)
    prev = wheel.link(arr(300), arr(4))  # a later batch continues the list
    assert prev.tolist() == [3] and wheel.list_of(300) == SlotList(4, 0, 4)
    wheel.close()


def test_a_slot_from_an_earlier_turn_is_stale_not_cleared(tmp_path: Path) -> None:
    wheel = TimingWheel(tmp_path / "wheel", TICK, 16)
    wheel.link(arr(300), arr(0))
    later = 300 + 16 * TICK  # same slot number, next turn of the wheel
    assert wheel.list_of(later) == EMPTY_LIST
    assert wheel.link(arr(later), arr(1)).tolist() == [-1]  # not linked to the stale list
    assert wheel.list_of(later) == SlotList(1, 1, 1) and wheel.list_of(300) == EMPTY_LIST
    wheel.close()


def test_scan_finds_non_empty_ticks_in_order(tmp_path: Path) -> None:
    wheel = TimingWheel(tmp_path / "wheel", TICK, 64)
    wheel.link(arr(900, 200, 200, 4_000), arr(0, 1, 2, 3))
    found = wheel.scan(0, 6_300)
    assert found.times.tolist() == [200, 900, 4_000] and found.counts.tolist() == [2, 1, 1]
    assert found.firsts.tolist() == [1, 0, 3] and found.lasts.tolist() == [2, 0, 3]
    assert found.scanned_to == 6_300
    assert wheel.scan(0, 6_300, limit=10).scanned_to == 900  # looked at 10 slots only
    assert wheel.live_summary(300) == (900, 0)
    assert wheel.live_summary(4_100) == (None, None)
    wheel.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=200), st.integers(1, 7))
def test_rebuild_gives_the_slots_that_linking_gave(
    tmp_path_factory: pytest.TempPathFactory, ticks: list[int], batch: int
) -> None:
    d = tmp_path_factory.mktemp("w")
    a = TimingWheel(d / "a", TICK, 64)
    b = TimingWheel(d / "b", TICK, 64)
    times = np.array(ticks, dtype=np.int64) * TICK
    idx = np.arange(len(times), dtype=np.int64)
    for s in range(0, len(times), batch):
        a.link(times[s : s + batch], idx[s : s + batch])
    half = len(times) // 2
    b.rebuild_chunk(times[:half], idx[:half])
    b.rebuild_chunk(times[half:], idx[half:])
    b.seal_rebuild()
    assert np.array_equal(a.slots, b.slots)
    assert len(a.bad_slots()) == 0
    a.close()
    b.close()


def test_reopen_with_other_geometry_names_the_setting(tmp_path: Path) -> None:
    TimingWheel(tmp_path / "wheel", TICK, 16).close()
    with pytest.raises(ConfigError, match="tick_ms"):
        TimingWheel(tmp_path / "wheel", 50, 16)
    with pytest.raises(ConfigError, match="wheel_slots"):
        TimingWheel(tmp_path / "wheel", TICK, 32)


def test_damaged_slot_and_header_are_detected(tmp_path: Path) -> None:
    wheel = TimingWheel(tmp_path / "wheel", TICK, 16)
    wheel.link(arr(300), arr(0))
    wheel.set_stamp(1)
    wheel.close()
    raw = bytearray((tmp_path / "wheel").read_bytes())
    raw[64 + 3 * 32 + 20] ^= 0x04  # the `first` field of slot 3
    (tmp_path / "wheel").write_bytes(bytes(raw))
    wheel = TimingWheel(tmp_path / "wheel", TICK, 16)
    assert wheel.bad_slots().tolist() == [3]
    wheel.close()
    raw[40] ^= 1  # the stamp, inside the header's CRC
    (tmp_path / "wheel").write_bytes(bytes(raw))
    with pytest.raises(IntegrityError, match="header CRC"):
        TimingWheel(tmp_path / "wheel", TICK, 16)
