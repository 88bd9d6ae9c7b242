"""The store on a real tmpfs that runs out of pages at every point of an append.

The fault-injecting unit tests (tests/unit/timerlog/test_timerlog_disk_full.py) fail
each write the store makes; this one lets the kernel do it: the filesystem is filled to
leave 0, 1, 2, ... pages, and a batch that needs a few pages of commit log and then one
more page of timer log is appended. One of those fills lets the commit-log write through
and refuses the timer-log write -- before issue 10 that left a checkpoint past the last
entry at the next flush, and the store never opened again.
"""

from __future__ import annotations

from pathlib import Path

from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from tests.integration.small_disk import PAGE, fill, tmpfs
from tests.unit.timerlog.support import START_MS, drain, rec

SETTINGS = StoreSettings(
    tick_ms=100, wheel_slots=64, commit_segment_bytes=1 << 20, timer_segment_entries=1024
)
BATCH = 200  # 200 entries run past the timer segment's first page (126 fit after the header)


def test_every_fill_level_leaves_a_store_that_opens_and_holds_whole_batches(
    tmp_path: Path,
) -> None:
    outcomes = []
    with tmpfs(tmp_path / "disk", "4m") as disk:
        batch_pages = -(-BATCH * len(rec("b000", 0).value or b"") // PAGE) + 2
        for leave in range(batch_pages + 3):
            clock = ManualClock(START_MS)
            where = disk / f"store-{leave}"
            store = TimerStore.open(where, SETTINGS, clock)
            store.append([rec("first", START_MS + 500, offset=0)])
            store.flush()
            filler = fill(disk, leave * PAGE)
            batch = [rec(f"b{i:03}", START_MS + 500, offset=1 + i) for i in range(BATCH)]
            try:
                store.append(batch)
                stored = True
            except OSError:
                stored = False
            outcomes.append(stored)
            filler.unlink()  # space is back
            store.flush()
            store.close()
            with TimerStore.open(where, SETTINGS, clock) as again:  # it opens
                clock.advance(1_000)
                ids = [r.id for r in drain(again)]
            expect = ["first"] + ([r.id for r in batch] if stored else [])
            assert ids == expect, f"left {leave} pages"
            for path in sorted(where.rglob("*"), reverse=True):  # room for the next one
                path.unlink() if path.is_file() else path.rmdir()
    assert not outcomes[0] and outcomes[-1], outcomes  # from full to enough room
