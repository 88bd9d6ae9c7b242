"""The store on a real tmpfs that runs out of pages at every point of an append.

The fault-injecting unit tests (tests/unit/timerlog/test_timerlog_disk_full.py) fail
each write the store makes; these let the kernel do it. First, the filesystem is filled to
leave 0, 1, 2, ... pages, and a batch that needs a few pages of commit log and then one
more page of timer log is appended. One of those fills lets the commit-log write through
and refuses the timer-log write -- before issue 10 that left a checkpoint past the last
entry at the next flush, and the store never opened again.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
import signal
import subprocess
import sys
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


SIGBUS_PROBE = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 1 << 20)  # a sparse file: all hole
print(mmap.mmap(fd, 1 << 20)[8192:8200])  # a read of the hole, through a map
"""


def test_on_a_full_tmpfs_reading_a_hole_through_a_map_dies_of_sigbus(tmp_path: Path) -> None:
    """Why the wheel reserves a page before it reads it, and why no reader may read a
    hole the store punched through a map: on a full tmpfs, even a *read* allocates."""
    with tmpfs(tmp_path / "disk", "1m") as disk:
        fill(disk, 0)
        probe = subprocess.run(
            [sys.executable, "-c", SIGBUS_PROBE, str(disk / "sparse")], capture_output=True
        )
        assert probe.returncode == -signal.SIGBUS, probe


RECORD = 100 * 1024


def test_a_store_that_fills_its_volume_gives_back_what_it_delivers(tmp_path: Path) -> None:
    """The issue's full volume, store by store: appends until the disk refuses one
    (store.min_free_bytes 0, the worst case), the rest of the volume filled too, then
    deliveries give the space back -- three times over, with the default settings (a
    64 MiB commit segment on an 8 MiB volume, the one-day sparse wheel). Nothing dies of
    SIGBUS, every record comes out whole, and the reserve lets a flush checkpoint with
    no room left."""
    with tmpfs(tmp_path / "disk", "8m") as disk:
        clock = ManualClock(START_MS)
        store = TimerStore.open(disk / "store", StoreSettings(), clock)
        stored = delivered = 0
        for cycle in range(3):
            while True:  # fill the volume with the store's own appends
                due = clock.now_ms() + 1_000 + stored
                batch = [
                    rec(f"m{stored + i}", due, offset=stored + i, value=_value(stored + i))
                    for i in range(5)
                ]
                try:
                    store.append(batch)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
                stored += len(batch)
                with contextlib.suppress(OSError):
                    store.flush()
            filler = fill(disk, 0)  # and the last page too
            assert shutil.disk_usage(disk).free < PAGE
            clock.advance(60_000)
            out = drain(store)
            assert [r.id for r in out] == [f"m{i}" for i in range(delivered, stored)]
            assert all(r.value == _value(int(r.id[1:])) for r in out)
            delivered = stored
            store.space_short = True
            store.flush()  # checkpoints in the reserve's room, then gives space back
            filler.unlink()
            assert shutil.disk_usage(disk).free >= 7 * 1024 * 1024, cycle
        assert stored * RECORD >= 3 * 6 * 1024 * 1024
        assert store.stats().corrupt_records_total == 0
        store.close()


def _value(n: int) -> bytes:
    return bytes([n % 251]) * RECORD
