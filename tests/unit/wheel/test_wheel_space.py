"""The wheel's file is sparse and grows by the chunks its slots use (issue 25 item 4).

Before, the whole file (27.6 MB with the default 864,000 slots) was allocated when it
was made: a store with nothing in it cost that much per partition. Now a 64 KiB chunk
is reserved (``posix_fallocate``) before a slot in it is first written, so a full disk
is an ENOSPC from the reservation, never a SIGBUS from a store into a hole of the map;
and a chunk never reserved is never read through the map either (on a full tmpfs a read
of a hole dies of SIGBUS too: tests/integration/timerlog/test_store_full_tmpfs.py).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from delaybridge.durable import allocated_bytes
from delaybridge.wheel import EMPTY_LIST, SlotList, TimingWheel
from delaybridge.wheel.wheel import CHUNK
from tests.unit.timerlog.faulty_disk import FaultyDisk

TICK = 100
SLOTS = 864_000  # the default: a one-day window, a 27.6 MB file
SLOTS_PER_CHUNK = CHUNK // 32


def arr(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def tick_of_slot(slot: int) -> int:
    return slot * TICK


def test_a_new_wheel_takes_one_chunk_and_grows_by_the_chunks_it_uses(tmp_path: Path) -> None:
    path = tmp_path / "wheel"
    wheel = TimingWheel(path, TICK, SLOTS)
    assert path.stat().st_size == 64 + 32 * SLOTS
    assert allocated_bytes(path) <= CHUNK == wheel.reserved_bytes
    wheel.link(arr(tick_of_slot(5), tick_of_slot(6)), arr(0, 1))  # in the header's chunk
    assert wheel.reserved_bytes == CHUNK
    far = 10 * SLOTS_PER_CHUNK
    wheel.link(arr(tick_of_slot(far), tick_of_slot(far + 1), tick_of_slot(3 * far)), arr(2, 3, 4))
    assert wheel.reserved_bytes == 3 * CHUNK
    assert allocated_bytes(path) == 3 * CHUNK
    assert wheel.list_of(tick_of_slot(far)) == SlotList(1, 2, 2)
    wheel.close()


def test_slots_in_chunks_never_used_read_as_empty_and_are_never_touched(tmp_path: Path) -> None:
    wheel = TimingWheel(tmp_path / "wheel", TICK, SLOTS)
    used = [7, 20 * SLOTS_PER_CHUNK + 3, 300 * SLOTS_PER_CHUNK]
    wheel.link(arr(*map(tick_of_slot, used)), arr(0, 1, 2))
    assert wheel.list_of(tick_of_slot(2 * SLOTS_PER_CHUNK)) == EMPTY_LIST
    found = wheel.scan(0, tick_of_slot(SLOTS - 1), limit=SLOTS)
    assert found.times.tolist() == [tick_of_slot(s) for s in used]
    assert found.scanned_to == tick_of_slot(SLOTS - 1)
    assert wheel.live_summary(0) == (tick_of_slot(7), 0)
    assert wheel.live_count(-1) == 3
    reserved = set(np.flatnonzero(wheel._reserved).tolist())
    for start, part in wheel.passes(1000):  # every piece lies in reserved chunks
        first = (64 + 32 * start) // CHUNK
        last = (64 + 32 * (start + len(part)) - 1) // CHUNK
        assert set(range(first, last + 1)) <= reserved, (start, len(part))
    del part  # a view of the map: the map cannot close while it lives
    wheel.close()


def test_reopening_adopts_the_chunks_in_use(tmp_path: Path) -> None:
    path = tmp_path / "wheel"
    wheel = TimingWheel(path, TICK, SLOTS)
    wheel.link(arr(tick_of_slot(40 * SLOTS_PER_CHUNK)), arr(0))
    wheel.close()
    again = TimingWheel(path, TICK, SLOTS)
    assert again.reserved_bytes == 2 * CHUNK and allocated_bytes(path) == 2 * CHUNK
    assert again.list_of(tick_of_slot(40 * SLOTS_PER_CHUNK)) == SlotList(1, 0, 0)
    again.close()


def test_a_wheel_an_older_build_allocated_whole_opens_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "wheel"
    old = TimingWheel(path, TICK, 4096)
    old.link(arr(tick_of_slot(4000)), arr(0))
    old.close()
    fd = os.open(path, os.O_RDWR)
    os.posix_fallocate(fd, 0, 64 + 32 * 4096)  # what every build before this one did
    os.close(fd)
    whole = allocated_bytes(path)
    wheel = TimingWheel(path, TICK, 4096)
    assert wheel.list_of(tick_of_slot(4000)) == SlotList(1, 0, 0)
    # Chunks allocated but never written (the file system reports them as holes) are
    # reserved again when first used, which allocates nothing new.
    wheel.link(arr(tick_of_slot(2000)), arr(1))
    assert wheel.list_of(tick_of_slot(2000)) == SlotList(1, 1, 1)
    assert allocated_bytes(path) == whole
    wheel.close()


def test_a_full_disk_fails_the_reservation_before_any_slot_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = TimingWheel(tmp_path / "wheel", TICK, SLOTS)
    wheel.link(arr(tick_of_slot(3)), arr(0))
    before = wheel.slots.copy()
    with FaultyDisk(1).installed(monkeypatch) as disk:
        with pytest.raises(OSError) as raised:
            wheel.plan_link(arr(tick_of_slot(30 * SLOTS_PER_CHUNK)), arr(1))
        assert raised.value.errno == errno.ENOSPC and disk.refused == 1
        assert np.array_equal(wheel.slots, before)
        # A slot in a chunk already reserved needs no space: it links on a full disk.
        wheel.link(arr(tick_of_slot(4)), arr(1))
        assert disk.refused == 1
    assert wheel.list_of(tick_of_slot(4)) == SlotList(1, 1, 1)
    assert wheel.list_of(tick_of_slot(30 * SLOTS_PER_CHUNK)) == EMPTY_LIST
    wheel.close()
