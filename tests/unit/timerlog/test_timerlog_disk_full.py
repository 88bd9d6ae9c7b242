"""A full disk at every write position: appends all or nothing, the store always reopens.

Before issue 10 ``append`` wrote the commit log, then linked the wheel, then wrote the
timer log with no way back: when the timer-log write failed, the commit log's end and
the wheel had moved, a later flush wrote a checkpoint past the last entry, and every
later open failed (``IntegrityError ... the checkpoint says ...``). A roll that could
not be written raised out of ``take_due`` after the cursor had passed it.

The scenario runs once per write the store makes (:class:`FaultyDisk` fails the n-th,
after writing half of it, and every one after it): appends, a cancel, flushes, delivery
and a roll while the disk fills, then space comes back (or the process dies).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from delaybridge.timerlog.reader import ROLL_RETRY_MS
from tests.unit.timerlog.faulty_disk import FaultyDisk
from tests.unit.timerlog.support import START_MS, drain, rec

BASE = [f"a{i}" for i in range(5)] + ["long"] + [f"f{i}" for i in range(30)]
SETTLED = set(BASE) - {"a1"}  # a1 is cancelled while the disk fills


class Run:
    """The scenario on one store; ``outcome`` records which appends went in."""

    def __init__(self, directory: Path, settings: StoreSettings) -> None:
        self.clock = ManualClock(START_MS)
        self.directory = directory
        self.settings = settings
        self.store = TimerStore.open(directory, settings, self.clock)
        self.delivered: list[str] = []
        self.stored: set[str] = set()
        self.offset = 0

    def append(self, ids: list[str], due_ms: int) -> None:
        records = []
        for i in ids:
            self.offset += 1
            records.append(rec(i, due_ms, offset=self.offset))
        try:
            self.store.append(records)
        except OSError:
            return
        self.stored |= set(ids)

    def flush(self) -> None:
        with contextlib.suppress(OSError):  # the disk is full: the last checkpoint stays
            self.store.flush()

    def deliver(self, advance_ms: int) -> None:
        self.clock.advance(advance_ms)
        self.delivered += [r.id for r in drain(self.store)]

    def baseline(self) -> None:
        now = START_MS
        self.append([f"f{i}" for i in range(30)], now + 300)
        self.append([f"a{i}" for i in range(5)], now + 500)
        self.append(["long"], now + 10_000)  # beyond the 6.4 s window: rolled on the way
        self.store.flush()

    def while_filling(self) -> None:
        self.append([f"b{i}" for i in range(30)], START_MS + 600)
        self.store.cancel([("a1", None)])
        self.flush()
        self.deliver(1_000)  # delivery goes on while the disk is full
        self.append([f"c{i}" for i in range(5)], self.clock.now_ms() + 500)
        self.deliver(4_000)  # the roll of "long" falls due here
        self.flush()

    def reopen(self) -> None:
        self.store = TimerStore.open(self.directory, self.settings, self.clock)


def count_writes(tmp_path: Path, small: StoreSettings, monkeypatch: pytest.MonkeyPatch) -> int:
    run = Run(tmp_path / "count", small)
    run.baseline()
    with FaultyDisk().installed(monkeypatch) as disk:
        run.while_filling()
    assert run.store.stats().rolled_total == 1  # the scenario does reach a roll
    run.store.close()
    return disk.calls


def test_space_back_every_write_position(
    tmp_path: Path, small: StoreSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = count_writes(tmp_path, small, monkeypatch)
    assert writes >= 10  # appends, cancel log, checkpoints, a new segment, the roll
    for n in range(1, writes + 1):
        run = Run(tmp_path / f"back-{n}", small)
        run.baseline()
        with FaultyDisk(n).installed(monkeypatch) as disk:
            run.while_filling()
            assert disk.refused, f"write {n}: the disk never filled"
            disk.free()
            run.store.flush()  # space is back: the next flush goes through
            run.deliver(ROLL_RETRY_MS + 10_000)
        run.store.close()
        run.reopen()
        run.deliver(20_000)
        run.store.close()
        expect = SETTLED | (run.stored - {"a1"})
        assert sorted(run.delivered) == sorted(expect), f"write {n}"


def test_crash_on_a_full_disk_every_write_position(
    tmp_path: Path, small: StoreSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = count_writes(tmp_path, small, monkeypatch)
    for n in range(1, writes + 1):
        run = Run(tmp_path / f"crash-{n}", small)
        run.baseline()
        with FaultyDisk(n).installed(monkeypatch):
            run.while_filling()
            run.store.abandon()  # kill -9 while the disk is full
        run.reopen()  # opens: every checkpoint written describes data on disk
        run.deliver(ROLL_RETRY_MS + 30_000)
        run.store.close()
        got = set(run.delivered)
        # At least once: every flushed message; nothing that was never appended.
        assert SETTLED <= got <= SETTLED | {"a1"} | run.stored, f"write {n}"
