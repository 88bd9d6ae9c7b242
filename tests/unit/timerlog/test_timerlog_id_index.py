"""The id index (``.tidx`` files): rebuilt when missing or damaged, never trusted stale,
deleted with its segment, 6 bytes an entry; cancels and lookups through it."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from delaybridge.fileformat import HEADER_SIZE
from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from delaybridge.timerlog.id_index_file import IndexFile, slot_bytes
from tests.unit.timerlog.support import START_MS, drain, rec
from tests.unit.timerlog.test_timerlog_id_index_model import (
    DAMAGE,
    RUN,
    SETTINGS,
    damage,
    no_space,
)

HOUR = 3_600_000


def fill(store: TimerStore, prefix: str, n: int, first_offset: int = 1) -> list[str]:
    """``n`` messages in batches of 8 (each fits the segment left: runs fill up)."""
    ids = [f"{prefix}{i}" for i in range(n)]
    for b in range(0, n, 8):
        store.append(
            [
                rec(i, START_MS + HOUR, offset=first_offset + b + k)
                for k, i in enumerate(ids[b : b + 8])
            ]
        )
    return ids


def agree(store: TimerStore, ids: list[str]) -> None:
    hashes = {zlib.crc32(i.encode()) for i in ids}
    timer = store.timer
    assert timer.find_ids(timer.start, hashes) == timer.scan_ids(timer.start, hashes)


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_index_file_is_rebuilt(tmp_path: Path, clock: ManualClock, how: str) -> None:
    store = TimerStore.open(tmp_path, SETTINGS, clock)
    ids = fill(store, "m", 200)  # 3 full segments of 64 and a part: 12 sealed runs
    store.close()
    for pick in range(0, 28, 7):  # slots 0..3 of the first file
        damage(tmp_path, how, pick)
        store = TimerStore.open(tmp_path, SETTINGS, clock)
        assert store.timer.index.rebuilt >= 1
        agree(store, ids)
        assert store.lookup("m3") is not None and store.lookup("m70") is not None
        store.close()


def test_runs_sealed_before_a_crash_are_not_trusted(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries appended after the last flush are cut by recovery and written over. The
    slots sorted from them before the crash are overwritten when their runs seal again
    -- unless that write fails (a full disk: the run is held in memory) and the store
    crashes once more: the stale slots then claim runs the checkpoint covers, and must
    not hide the entries now there."""
    store = TimerStore.open(tmp_path, SETTINGS, clock)
    fill(store, "a", 40)
    store.flush()
    lost = fill(store, "lost", 40, first_offset=41)
    assert store.cancel([("nobody", None)]) == [False]  # the index seals runs up to 80
    store.abandon()
    store = TimerStore.open(tmp_path, SETTINGS, clock)
    assert store.timer.end == 40
    with monkeypatch.context() as m:
        m.setattr(IndexFile, "write", no_space)
        new = fill(store, "new", 40, first_offset=41)
        store.flush()  # the runs to 80 seal in memory only
        assert store.timer.index.held
        store.abandon()
    store = TimerStore.open(tmp_path, SETTINGS, clock)
    assert store.timer.end == 80 and store.timer.index.rebuilt >= 2
    agree(store, new + lost)
    assert store.cancel([(i, None) for i in new]) == [True] * 40
    assert store.lookup("lost3") is None
    store.close()


def test_index_files_go_with_their_segments(tmp_path: Path, clock: ManualClock) -> None:
    store = TimerStore.open(tmp_path, SETTINGS, clock)
    for b in range(0, 300, 30):
        store.append([rec(f"m{i}", START_MS + 100, offset=i + 1) for i in range(b, b + 30)])
    store.flush()
    tidx = tmp_path / "timerlog"
    assert len(list(tidx.glob("*.tidx"))) >= 4
    clock.advance(1_000)
    assert len(drain(store)) == 300
    store.flush(recompute_live=True)
    segments = {p.stem for p in tidx.glob("*.tlog")}
    assert {p.stem for p in tidx.glob("*.tidx")} <= segments
    store.close()
    (tidx / f"{10**6:020d}.tidx").write_bytes(b"orphan")  # no such segment
    (tidx / "notes.tidx").write_bytes(b"an operator's file")  # not ours: left alone
    store = TimerStore.open(tmp_path, SETTINGS, clock)
    assert not (tidx / f"{10**6:020d}.tidx").exists()
    assert (tidx / "notes.tidx").exists()
    store.close()


def test_index_costs_six_bytes_an_entry(tmp_path: Path, clock: ManualClock) -> None:
    settings = StoreSettings(
        tick_ms=100, wheel_slots=64, timer_segment_entries=4096, index_run_entries=1024
    )
    store = TimerStore.open(tmp_path, settings, clock)
    fill(store, "m", 4096)
    store.flush()
    index = store.timer.index.bytes_on_disk()
    assert 4096 * 6 <= index <= 4096 * 6 + HEADER_SIZE + 4 * (slot_bytes(1024) % 4096 + 4096)
    store.close()


def test_cancel_and_lookup_through_the_index(tmp_path: Path, clock: ManualClock) -> None:
    """Hits in sealed runs, in the run still filling, and across a restart."""
    store = TimerStore.open(tmp_path, SETTINGS, clock)
    ids = fill(store, "m", 150)
    store.flush()
    assert store.cancel([("m0", None), ("m149", None), ("m77", "other")]) == [True, True, False]
    store.close()
    store = TimerStore.open(tmp_path, SETTINGS, clock)
    assert store.lookup("m0") is None and store.lookup("m1") is not None
    assert store.cancel([(i, None) for i in ids]) == [i not in ("m0", "m149") for i in ids]
    assert store.stats().pending == 0
    store.close()


def test_a_full_disk_keeps_runs_in_memory(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.timerlog.faulty_disk import FaultyDisk

    store = TimerStore.open(tmp_path, SETTINGS, clock)
    fill(store, "a", 10)
    ids = fill(store, "b", 50, first_offset=11)
    with FaultyDisk().installed(monkeypatch) as disk:
        disk.full = True
        assert store.cancel([("b7", None)]) == [True]  # seals runs: cannot write them
        assert disk.refused and store.timer.index.held
        disk.free()
        assert store.cancel([("b8", None)]) == [True]  # writes them now
        assert not store.timer.index.held
    agree(store, ids)
    store.close()
    assert RUN == 16
