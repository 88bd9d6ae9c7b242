"""A store written before the 20-byte timer entry (timer log version 1) under this build.

``fixtures/store_tl1`` was written by commit 2017770 (``fixtures/make_store_tl1.py``):
the messages of ``make_store_v1`` in compact commit-log records (version 2) and
32-byte timer entries (version 1). The upgrade is per segment, like the commit log's:
the old timer segments are read as they are, the last one is sealed at open, and new
entries (and rolled copies) go to new segments of version 2. These tests show that
such a store opens, drains exactly what was pending (cancels before the upgrade hold,
cancels after it apply), takes new entries, and survives kill -9 at points of its
first appends.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from delaybridge.durable import pwrite_all
from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind
from delaybridge.timerlog import ManualClock, TimerStore, segments, timer_entry
from delaybridge.timerlog import timer_segments as tseg
from delaybridge.timerlog.timer_log import TimerLog
from tests.unit.timerlog.fixtures.make_store_v1 import SETTINGS, record
from tests.unit.timerlog.support import drain
from tests.unit.timerlog.test_timerlog_upgrade import drain_all, new_record

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = json.loads((FIXTURES / "store_tl1.json").read_text())
REPO = Path(__file__).parents[3]


def copy_tl1(tmp_path: Path) -> Path:
    directory = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_tl1", directory)
    return directory


def timer_versions(directory: Path) -> dict[str, tuple[int, int]]:
    """(format version, entry size) of each timer-log segment, by file name."""
    out = {}
    for path in sorted((directory / "timerlog").glob("*.tlog")):
        h = FileHeader.decode(path.read_bytes()[:HEADER_SIZE], path, FileKind.TIMER_LOG)
        out[path.name] = (h.version, h.entry_size)
    return out


def test_a_timer_log_v1_store_opens_drains_exactly_and_takes_cancels(tmp_path: Path) -> None:
    directory = copy_tl1(tmp_path)
    old = {p.name: p.read_bytes() for p in (directory / "timerlog").glob("*.tlog")}
    assert set(timer_versions(directory).values()) == {(1, 32)}
    clock = ManualClock(EXPECTED["now_ms"])
    store = TimerStore.open(directory, SETTINGS, clock)
    pending = EXPECTED["pending"]
    assert store.stats().pending == len(pending)
    for gone in EXPECTED["cancelled"] + EXPECTED["delivered"]:
        assert store.lookup(gone) is None
    assert store.lookup("order-100") == record(100)  # found through a v1 entry
    late = ["order-30", "order-124", "order-149"]  # in the window, and two ROLLs
    assert store.cancel([(c, None) for c in late]) == [True, True, True]
    store.append([new_record(i) for i in range(10)])
    store.flush()
    after = timer_versions(directory)
    assert len(after) == len(old) + 1 and list(after.values())[-1] == (2, 20)
    for name, data in old.items():  # nothing old is rewritten
        assert (directory / "timerlog" / name).read_bytes()[: len(data)] == data
    assert store.lookup("new-3") == new_record(3)  # found through a v2 entry
    assert store.cancel([("new-4", None)]) == [True]
    got = drain_all(store, clock)
    store.close()
    want = [record(int(i.split("-")[1])) for i in pending if i not in late]
    want += [new_record(i) for i in range(10) if i != 4]
    assert sorted(got) == sorted(want)  # each once, every field as written
    store = TimerStore.open(directory, SETTINGS, clock)  # only v2 segments left, or both
    assert store.stats().pending == 0 and drain(store) == []
    store.append([new_record(i) for i in range(20, 25)])
    clock.advance(SETTINGS.window_ms)
    assert sorted(r.id for r in drain(store)) == [f"new-{i}" for i in range(20, 25)]
    store.close()


def test_a_timer_log_v1_store_recovers_after_a_crash_with_new_entries(tmp_path: Path) -> None:
    directory = copy_tl1(tmp_path)
    clock = ManualClock(EXPECTED["now_ms"])
    store = TimerStore.open(directory, SETTINGS, clock)
    store.append([new_record(i) for i in range(5)])
    store.flush()
    store.append([new_record(i) for i in range(5, 10)])  # not flushed: lost in the crash
    store.abandon()
    store = TimerStore.open(directory, SETTINGS, clock)
    got = [r.id for r in drain_all(store, clock)]
    store.close()
    assert len(got) == len(set(got))
    assert set(got) == set(EXPECTED["pending"]) | {f"new-{i}" for i in range(5)}


def test_a_timer_log_v1_store_without_its_checkpoint_is_rescued(tmp_path: Path) -> None:
    """The rescue reads both entry formats from the files alone."""
    directory = copy_tl1(tmp_path)
    clock = ManualClock(EXPECTED["now_ms"])
    store = TimerStore.open(directory, SETTINGS, clock)
    store.append([new_record(i) for i in range(5)])
    store.flush()
    store.close()
    (directory / "checkpoint").unlink()
    store = TimerStore.open(directory, SETTINGS, clock)
    assert store.rescued
    got = {r.id for r in drain_all(store, clock)}
    store.close()
    assert set(EXPECTED["pending"]) | {f"new-{i}" for i in range(5)} <= got


CHILD = """
import json
import sys
from pathlib import Path
from delaybridge.timerlog import ManualClock, TimerStore, segments, timer_entry
from delaybridge.timerlog import timer_segments as tseg
from delaybridge.timerlog.timer_log import TimerLog
from tests.unit.timerlog.fixtures.make_store_v1 import SETTINGS
from tests.unit.timerlog.test_timerlog_upgrade import new_record
clock = ManualClock(int(sys.argv[2]))
store = TimerStore.open(Path(sys.argv[1]), SETTINGS, clock)
print("open", flush=True)
i = 0
delivered = []
while True:
    store.append([new_record(j) for j in range(i, i + 7)])
    i += 7
    while got := store.take_due(5):  # deliveries and rolls write v2 entries too
        delivered += [d.record.id for d in got]
        store.mark_delivered(got[-1].cursor)
    clock.advance(300)
    if i % 14 == 0:
        store.flush()
        print(i, json.dumps(delivered), flush=True)
"""


@pytest.mark.parametrize("lines", [1, 2, 4, 9])
def test_kill_9_during_the_upgrade_leaves_a_store_that_opens_and_drains(
    tmp_path: Path, lines: int
) -> None:
    """SIGKILL after the open (the v1 tail sealed, nothing new yet), after the first
    flush into a new version-2 segment, and a few segments (and rolls) later: what was
    flushed is kept, what was delivered and flushed never comes again, the rest comes
    once."""
    directory = copy_tl1(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), str(EXPECTED["now_ms"])],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert child.stdout is not None
    said = [child.stdout.readline().strip() for _ in range(lines)]
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert said[0] == "open"
    flushed, done = 0, set()
    if lines > 1:
        count, ids = said[-1].split(" ", 1)
        flushed, done = int(count), set(json.loads(ids))
    if lines > 4:  # 112 new entries and their rolls: two v2 segments of 64 at least
        assert list(timer_versions(directory).values())[-2:] == [(2, 20), (2, 20)]
    clock = ManualClock(int(EXPECTED["now_ms"]) + 300 * flushed // 7)
    store = TimerStore.open(directory, SETTINGS, clock)
    got = [r.id for r in drain_all(store, clock)]
    store.close()
    assert len(got) == len(set(got))
    every = set(EXPECTED["pending"]) | {f"new-{i}" for i in range(flushed)}
    assert set(got) == every - done


def wide(first: int, slots: list[int], cl0: int) -> np.ndarray:
    n = len(slots)
    return timer_entry.build(
        np.arange(n, dtype=np.uint32),
        np.full(n, -1, np.int64),
        np.array(slots, np.int64),
        np.arange(cl0, cl0 + n, dtype=np.int64),
        np.ones(n, np.uint64),
        crc=False,
    )


def test_a_batch_its_segment_cannot_hold_starts_a_new_one_even_over_a_failed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bases that do not fit seal the segment early; an empty segment left by a failed
    write (a full disk) is replaced, not duplicated, when the next batch needs others."""
    t0 = 1_700_000_000_000
    far = t0 + (1 << 30) * 100  # 2^30 ticks later: beyond the first segment's bases
    log = TimerLog(tmp_path, 64, 16, 100)
    log.open(0)
    assert log.append(wide(0, [t0, t0 + 100], 0)) == 0
    assert log.append(wide(2, [far], 10)) == 2  # sealed early: a new segment at entry 2
    assert [s.base for s in log.log.segments] == [0, 64]

    def fail_data(fd: int, data: bytes, offset: int) -> None:
        if offset >= HEADER_SIZE:  # the new segment's header is written, its data not
            raise OSError(28, "No space left on device")
        pwrite_all(fd, data, offset)

    monkeypatch.setattr(segments, "pwrite_all", fail_data)
    with pytest.raises(OSError):
        log.append(wide(3, [t0], 11))  # back near t0: a new segment, its write fails
    monkeypatch.setattr(segments, "pwrite_all", pwrite_all)
    assert [s.base for s in log.log.segments] == [0, 64, 96] and log.end == 3
    assert log.append(wide(3, [far + 100], 12)) == 3  # other bases: the empty one replaced
    assert [s.base for s in log.log.segments] == [0, 64, 96]
    assert log.read(0, 4, check=True)["slot_ms"].tolist() == [t0, t0 + 100, far, far + 100]
    log.sync()
    log.close()
    again = TimerLog(tmp_path, 64, 16, 100)
    again.open(4)
    assert again.read(0, 4, check=True)["slot_ms"].tolist() == [t0, t0 + 100, far, far + 100]
    assert again.entry(3).cl_pos == 12
    again.close()


def test_a_slot_list_threads_from_v2_entries_back_into_v1_ones(tmp_path: Path) -> None:
    """The three readers of a list (``chase`` one entry at a time, ``gather`` in
    arrays, ``entry``) agree on a list whose newest entries are v2 and oldest v1."""
    directory = copy_tl1(tmp_path)
    store = TimerStore.open(directory, SETTINGS, ManualClock(EXPECTED["now_ms"]))
    old = record(100)  # pending, due within the window: its entry is in a v1 segment
    store.append([new_record(i)._replace(due_ms=old.due_ms) for i in range(3)])
    timer = store.timer
    chain = [timer.end - 1]
    while (prev := timer.entry(chain[-1]).prev) >= 0:
        chain.append(prev)
    chain.reverse()
    versions = [tseg.bases_of(timer.log.locate(i * 32)[0]) is None for i in chain]
    assert versions[0] and not versions[-1]  # v1 first, v2 last
    idx, cls, kinds = timer.chase(chain[-1], len(chain))
    assert list(idx) == chain
    gathered = timer.gather(np.array(chain, np.int64))
    assert timer_entry.positions_of(gathered).tolist() == list(cls)
    assert timer_entry.kinds_of(gathered).tolist() == list(kinds)
    assert gathered["prev"].tolist() == [-1, *chain[:-1]]
    assert len(set(gathered["slot_ms"].tolist())) == 1
    store.close()
