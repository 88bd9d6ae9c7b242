"""A full disk: ingest pauses and rewinds, delivery goes on, nothing lost, no crash loop.

Before issue 10 an append that failed for want of space raised out of the loop; every
restart crashed on its first batch before delivering anything, so space was never freed.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from pathlib import Path

import pytest

from delaybridge.timerlog import EncodedBatch, TimerRecord, TimerStore
from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule
from tests.unit.timerlog.faulty_disk import FaultyDisk


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
        for _ in range(3):  # ingest resumes by itself once a write goes through
            side.checkpoint()
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
