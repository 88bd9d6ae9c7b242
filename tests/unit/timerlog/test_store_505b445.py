"""A store written by commit 505b445 opens, drains and writes unchanged under this build.

``fixtures/store_505b445`` was written by 505b445 (``fixtures/make_store_505b445.py``):
compact and wide commit records, version-2 timer entries in three segments with their
id-index files, ROLL entries, applied cancels, waiting cancels and a replace (matched
and not), a message a waiting cancel took, the owner's marks. These tests show that this
build reads all of it as it was written, and writes the same bytes for the same work.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from delaybridge.timerlog import Cancel, ManualClock, StoreMarks, TimerRecord, TimerStore
from delaybridge.timerlog.space_reserve import FILE_NAME
from tests.unit.timerlog.fixtures.make_store_505b445 import (
    MARKS,
    SETTINGS,
    START_MS,
    late,
    main,
    record,
)
from tests.unit.timerlog.support import drain

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = json.loads((FIXTURES / "store_505b445.json").read_text())


def copy(tmp_path: Path) -> Path:
    directory = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_505b445", directory)
    return directory


def files(directory: Path) -> dict[str, bytes]:
    """Every file of the store by name; not its space reserve (zeros, and no format:
    timerlog/space_reserve.py), which builds since 505b445 keep beside the data."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != FILE_NAME
    }


def message(offset: int) -> TimerRecord:
    return record(offset) if offset < 150 else late(offset - 150)


def drain_all(store: TimerStore, clock: ManualClock) -> list[TimerRecord]:
    """Everything but the message due in 30 days (cancelled first: rolled forward a
    6.4-second window at a time, it would take 400,000 copies), window by window."""
    assert store.lookup("order-149") == record(149)  # a wide record: a 30-day delay
    assert store.cancel([Cancel("order-149")]) == [True]
    out: list[TimerRecord] = []
    for _ in range(12):
        out += drain(store, 40)
        clock.advance(SETTINGS.window_ms // 2)
    return out


def pending_but_149() -> list[TimerRecord]:
    return [message(o) for o in EXPECTED["pending"] if o != 149]


def test_this_build_writes_what_505b445_wrote(tmp_path: Path) -> None:
    """The same appends, deliveries, cancels and flush, byte for byte in every file."""
    main(tmp_path / "store")
    assert files(tmp_path / "store") == files(FIXTURES / "store_505b445")
    assert json.loads((tmp_path / "store_505b445.json").read_text()) == EXPECTED


def test_opening_and_closing_rewrites_nothing(tmp_path: Path) -> None:
    directory = copy(tmp_path)
    store = TimerStore.open(directory, SETTINGS, ManualClock(EXPECTED["now_ms"]))
    store.close()
    assert files(directory) == files(FIXTURES / "store_505b445")


def test_it_opens_with_its_marks_counters_and_cancels_and_drains_what_was_pending(
    tmp_path: Path,
) -> None:
    directory = copy(tmp_path)
    clock = ManualClock(EXPECTED["now_ms"])
    store = TimerStore.open(directory, SETTINGS, clock)
    stats = store.stats()
    assert store.marks == StoreMarks.from_json(MARKS)
    assert stats.pending == len(EXPECTED["pending"])
    assert stats.waiting_cancels == EXPECTED["waiting_cancels"]
    for name, value in EXPECTED["counters"].items():
        assert getattr(stats, name) == value, name
    for gone in EXPECTED["removed"] + EXPECTED["delivered"]:
        assert store.lookup(gone) is None
    assert store.lookup("late-1") == late(1)
    assert store.lookup(record(47).id) == record(47)  # wide records: an id of 308 bytes,
    assert store.lookup("order-48") == record(48)  # a partition past int16
    # The waiting cancels hold across the reopen: a copy of order-99 sent before its
    # cancel is taken as it arrives, one sent after it is not.
    before = record(99)._replace(source_offset=200, source_timestamp_ms=START_MS + 400)
    after = record(99)._replace(source_offset=201, source_timestamp_ms=START_MS + 600)
    store.append([before, after])
    assert store.take_removed() == [before]
    got = drain_all(store, clock)
    store.close()
    want = [*pending_but_149(), after]
    assert sorted(got) == sorted(want)  # each once, every field as written
    store = TimerStore.open(directory, SETTINGS, clock)
    assert store.stats().pending == 0 and drain(store) == []
    store.close()


def test_after_a_crash_the_wheel_is_rebuilt_from_its_timer_log(tmp_path: Path) -> None:
    directory = copy(tmp_path)
    clock = ManualClock(EXPECTED["now_ms"])
    store = TimerStore.open(directory, SETTINGS, clock)
    store.abandon()  # like kill -9: the wheel is not stamped clean
    store = TimerStore.open(directory, SETTINGS, clock)
    assert store.wheel_rebuilt
    assert store.cancel([Cancel("order-100")]) == [True]
    got = drain_all(store, clock)
    store.close()
    want = [r for r in pending_but_149() if r.id != "order-100"]
    assert sorted(got) == sorted(want)
