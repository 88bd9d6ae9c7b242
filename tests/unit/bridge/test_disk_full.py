"""A full disk: ingest pauses and rewinds, delivery goes on, nothing lost, no crash loop.

Before issue 10 an append that failed for want of space raised out of the loop; every
restart crashed on its first batch before delivering anything, so space was never freed.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from delaybridge.timerlog import EncodedBatch, TimerRecord, TimerStore
from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule
from tests.unit.timerlog.faulty_disk import FaultyDisk

MIB = 1 << 20


def test_no_space_pauses_ingest_rewinds_and_resumes_when_there_is_room(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("early", 100))
    side.turns(1)
    part = side.service.partitions.by_key[(DELAY, 0)]
    real_append = part.store.append
    failures = {"left": 3}

    def full_disk(records: Sequence[TimerRecord]) -> EncodedBatch:
        if failures["left"]:
            failures["left"] -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_append(records)

    part.store.append = full_disk  # type: ignore[method-assign]
    for i in range(4):
        side.send(schedule(f"late{i}", 100))
    side.turns(1)
    assert side.service.flow.disk_full
    assert (DELAY, 0) in side.consumer.paused
    side.turns(2, advance_ms=200)
    assert [h["delay-id"] for h in side.delivered()] == ["early"]  # delivery goes on
    for _ in range(6):  # each check finds room, resumes, and the append is tried again
        side.checkpoint()
        side.turns(1, advance_ms=200)
    side.turns(3, advance_ms=200)
    assert not side.service.flow.disk_full
    assert [h["delay-id"] for h in side.delivered()] == ["early"] + [f"late{i}" for i in range(4)]
    assert part.store.stats().appended_total == 5  # each stored exactly once
    side.stop()


def test_a_flush_without_space_keeps_the_offset_and_does_not_crash(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("a", 60_000))
    side.turns(1)
    part = side.service.partitions.by_key[(DELAY, 0)]
    real_flush = TimerStore.flush

    def full_disk(self: TimerStore, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    TimerStore.flush = full_disk  # type: ignore[method-assign]
    try:
        side.checkpoint()  # no crash; the offset does not move past unflushed data
        assert side.committed(0) is None
    finally:
        TimerStore.flush = real_flush  # type: ignore[method-assign]
    side.checkpoint()
    assert side.committed(0) == 1
    assert part.store.stats().pending == 1
    side.stop()


def test_a_disk_that_fills_for_real_writes_no_crash_loop_and_the_store_reopens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("early", 500))
    side.turns(1)
    side.checkpoint()
    with FaultyDisk(1).installed(monkeypatch) as disk:  # every write from now on fails
        for i in range(3):
            side.send(schedule(f"late{i}", 100))
        side.send([("delay-cancel", "nobody")], partition=1)
        for _ in range(4):  # appends, flushes, the cancel log: refused, nothing raises
            side.turns(2, advance_ms=200)
            side.checkpoint()
        assert disk.refused
        assert [h["delay-id"] for h in side.delivered()] == ["early"]  # delivery goes on
        assert side.committed(0) == 1  # nothing committed past what is on disk
        disk.free()
        for _ in range(10):  # ingest resumes by itself once a write goes through (and
            side.checkpoint()  # the pause has lasted its wait: bridge/disk_pause.py)
            side.turns(2, advance_ms=200)
    late = [f"late{i}" for i in range(3)]
    assert [h["delay-id"] for h in side.delivered()] == ["early", *late]
    side.checkpoint()
    assert (side.committed(0), side.committed(1)) == (4, 1)
    side.stop()
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)  # it reopens
    again.turns(3, advance_ms=200)
    assert [h["delay-id"] for h in again.delivered()] == ["early", *late]
    assert again.service.partitions.by_key[(DELAY, 0)].store.stats().pending == 0
    again.stop()


class Volume:
    """The data volume as ``shutil.disk_usage`` reports it, with free space set by hand,
    and appends refused while it has less than they need."""

    def __init__(self, free: int, total: int = 8 * MIB) -> None:
        self.free = free
        self.total = total

    def usage(self, path: object) -> shutil._ntuple_diskusage:
        return shutil._ntuple_diskusage(self.total, self.total - self.free, self.free)


def test_at_min_free_bytes_0_a_full_disk_pauses_once_and_reads_nothing_again_until_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the hysteresis, every checkpoint found free space over 0, resumed, read the
    same records, was refused and paused again: one pause and one re-read per flush."""
    volume = Volume(free=512 * 1024)  # under the margin (an eighth of 8 MiB: 1 MiB)
    monkeypatch.setattr(shutil, "disk_usage", volume.usage)
    side = FakeSidecar(tmp_path, store={"min_free_bytes": 0})
    clock_s = [0.0]
    side.service.flow.disk._clock_s = lambda: clock_s[0]  # time stands still
    side.send(schedule("early", 100))
    side.turns(1)
    part = side.service.partitions.by_key[(DELAY, 0)]
    real_append = part.store.append
    tries = {"n": 0}

    def full_disk(records: Sequence[TimerRecord]) -> EncodedBatch:
        tries["n"] += 1
        if volume.free < 1 * MIB:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_append(records)

    part.store.append = full_disk  # type: ignore[method-assign]
    for i in range(4):
        side.send(schedule(f"late{i}", 100))
    metrics = side.service.metrics.registry
    for _ in range(50):  # 50 flush intervals on a full disk
        side.turns(2, advance_ms=100)
        side.checkpoint()
    # Read once, refused once: the run, then its first record alone.
    assert side.service.flow.disk_full and tries["n"] == 2
    assert metrics.get_sample_value("delaybridge_disk_pauses_total") == 1
    assert metrics.get_sample_value("delaybridge_disk_pause_active") == 1
    assert side.service.control.conditions()["disk"].startswith("ingest paused")
    assert part.store.space_short  # the stores give back what they finish, every flush
    assert [h["delay-id"] for h in side.delivered()] == ["early"]  # delivery goes on
    volume.free = 2 * MIB  # delivery freed space: over the resume level
    clock_s[0] += 1  # and the pause has lasted its wait
    for _ in range(3):
        side.checkpoint()
        side.turns(2, advance_ms=200)
    assert not side.service.flow.disk_full and not part.store.space_short
    assert metrics.get_sample_value("delaybridge_disk_pause_active") == 0
    assert side.service.control.conditions() == {}
    assert [h["delay-id"] for h in side.delivered()] == ["early"] + [f"late{i}" for i in range(4)]
    # Stored at the first try once there was room: the run, or (the loop was idle, and
    # an idle wait ends at the first record) that record, then the rest.
    assert tries["n"] == 4 and metrics.get_sample_value("delaybridge_disk_pauses_total") == 1
    side.stop()


def test_a_run_the_disk_cannot_hold_whole_is_stored_up_to_its_last_record_that_fits(
    tmp_path: Path,
) -> None:
    """A fetch of large records can be more than a small volume ever frees at once: a
    pause that waited for room for the whole run again might never end. The records
    that fit are stored, and ingest waits for the room of the first that did not."""
    side = FakeSidecar(tmp_path)
    side.send(schedule("early", 100))
    side.turns(1)
    part = side.service.partitions.by_key[(DELAY, 0)]
    real_append = part.store.append
    room = {"records": 2}

    def small_disk(records: Sequence[TimerRecord]) -> EncodedBatch:
        if len(records) > room["records"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        room["records"] -= len(records)
        return real_append(records)

    part.store.append = small_disk  # type: ignore[method-assign]
    offsets = [side.send(schedule(f"late{i}", 100)) for i in range(5)]
    side.turns(1)
    assert side.service.flow.disk_full
    assert part.store.stats().appended_total == 3  # early, late0, late1
    assert side.consumer.positions[(DELAY, 0)] == offsets[2]  # read again from late2
    assert side.service.flow.disk.needed < 1_000  # the room of one small record
    room["records"] = 100
    for _ in range(4):
        side.checkpoint()
        side.turns(2, advance_ms=200)
    assert [h["delay-id"] for h in side.delivered()] == ["early"] + [f"late{i}" for i in range(5)]
    assert part.store.stats().appended_total == 6  # each stored once
    side.stop()
