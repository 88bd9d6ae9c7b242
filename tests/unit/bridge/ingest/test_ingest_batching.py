"""Schedules and cancels interleaved in one batch are stored with one append.

The shop case: orders (schedules with ids) and the cancels of paid orders arrive
interleaved in the delay topic. Ingest appended the run of schedules before every cancel
(so the commit position could never cover a schedule not yet stored), i.e. one store
append per order: ~0.5 ms each, 2k records/s, and at 1k orders/s plus 700 cancels/s the
loop fell seconds behind (bench e2e --only cancels: deliveries every ~3 s, p99 lateness
3 s). Side writes of a batch now start after its partitions' schedules are appended: the
same guarantee (nothing that is not stored or acknowledged is committed; a run the disk
had no room for is read again, with the side writes after its first record).
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from pathlib import Path

from delaybridge.timerlog import EncodedBatch, TimerRecord, TimerStore
from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule


def _count_appends(part_store: TimerStore) -> list[int]:
    sizes: list[int] = []
    real = part_store.append

    def counting(records: Sequence[TimerRecord]) -> EncodedBatch:
        sizes.append(len(records))
        return real(records)

    part_store.append = counting  # type: ignore[method-assign]
    return sizes


def test_orders_and_cancels_interleaved_take_one_append_per_batch(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("warm", 60_000))
    side.turns(1)
    sizes = _count_appends(side.service.partitions.by_key[(DELAY, 0)].store)
    for i in range(50):
        side.send(schedule(f"order-{i}", 1_000))
        if i % 10 < 7:
            side.send([("delay-cancel", f"order-{i}")])
    side.turns(1)
    assert sizes == [50]
    assert len(side.cancels()) == 35
    side.turns(3, advance_ms=600)
    side.checkpoint()
    assert side.committed(0) == 1 + 50 + 35
    delivered = [h["delay-id"] for h in side.delivered()]
    assert delivered == [f"order-{i}" for i in range(50) if i % 10 >= 7]
    side.stop()


def test_a_run_without_room_holds_back_the_side_writes_after_it(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("warm", 60_000))
    side.turns(1)
    store = side.service.partitions.by_key[(DELAY, 0)].store
    real = store.append
    full = {"on": True}

    def full_disk(records: Sequence[TimerRecord]) -> EncodedBatch:
        if full["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(records)

    store.append = full_disk  # type: ignore[method-assign]
    side.send(schedule("a", 1_000))
    side.send([("delay-cancel", "gone")])
    side.send(schedule("b", 1_000))
    side.turns(1)
    # Its offset is after the rewind: ingest reads it again, not lost; meanwhile the
    # cancel scout publishes it, as ingest waits (the cancel horizon must not wait).
    assert len(side.cancels()) == 1
    side.checkpoint()
    assert side.committed(0) == 1
    full["on"] = False  # space is back (ingest resumes once the pause lasted 1 s)
    for _ in range(8):
        side.checkpoint()
        side.turns(1, advance_ms=200)
    side.turns(3, advance_ms=600)
    side.checkpoint()
    assert len(side.cancels()) == 2  # and by ingest, once, after the schedules were stored
    assert [h["delay-id"] for h in side.delivered()] == ["a", "b"]
    assert side.committed(0) == 4
    side.stop()
