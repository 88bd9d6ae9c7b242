"""A store written before compact records (commit log version 1) under this build.

``fixtures/store_v1`` was written by commit 9a585cc (``fixtures/make_store_v1.py``):
150 messages, 19 delivered, 5 cancelled, 30 of the rest beyond the window (ROLL
entries). The upgrade is per segment: the old segments are read as they are, the
last one is sealed at open, and new records (and rolled copies) go to new segments
of version 2. These tests show that such a store opens, drains exactly what was
pending (cancels applied before the upgrade hold, cancels after it apply), takes new
compact records, and survives kill -9 at any point of its first appends.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind
from delaybridge.timerlog import ManualClock, TimerRecord, TimerStore
from tests.unit.timerlog.fixtures.make_store_v1 import SETTINGS, record
from tests.unit.timerlog.support import drain

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = json.loads((FIXTURES / "store_v1.json").read_text())
REPO = Path(__file__).parents[3]


def copy_v1(tmp_path: Path) -> Path:
    directory = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_v1", directory)
    return directory


def versions(directory: Path) -> dict[str, int]:
    out = {}
    for path in sorted((directory / "commitlog").glob("*.clog")):
        raw = path.read_bytes()[:HEADER_SIZE]
        out[path.name] = FileHeader.decode(raw, path, FileKind.COMMIT_LOG).version
    return out


def drain_all(store: TimerStore, clock: ManualClock) -> list[TimerRecord]:
    """Everything, window by window (rolls copy long delays forward as the clock moves)."""
    out: list[TimerRecord] = []
    for _ in range(20):
        out += drain(store, 40)
        clock.advance(SETTINGS.window_ms // 2)
    return out + drain(store, 40)


def new_record(i: int) -> TimerRecord:
    return record(i)._replace(id=f"new-{i}", source_offset=1_000 + i)


def test_a_v1_store_opens_drains_and_takes_cancels(tmp_path: Path) -> None:
    directory = copy_v1(tmp_path)
    old_files = {p.name: p.read_bytes() for p in (directory / "commitlog").glob("*.clog")}
    assert set(versions(directory).values()) == {1}
    clock = ManualClock(EXPECTED["now_ms"])
    store = TimerStore.open(directory, SETTINGS, clock)
    pending = EXPECTED["pending"]
    assert store.stats().pending == len(pending)
    for gone in EXPECTED["cancelled"] + EXPECTED["delivered"]:
        assert store.lookup(gone) is None
    assert store.lookup("order-100") == record(100)  # a wide record, read as it was
    late = ["order-30", "order-124", "order-149"]  # in the window, and two ROLLs
    assert store.cancel([(c, None) for c in late]) == [True, True, True]
    store.append([new_record(i) for i in range(10)])
    store.flush()
    after = versions(directory)
    assert len(after) == len(old_files) + 1 and list(after.values())[-1] == 2
    for name, data in old_files.items():  # nothing old is rewritten
        assert (directory / "commitlog" / name).read_bytes()[: len(data)] == data
    got = drain_all(store, clock)
    store.close()
    want = [record(int(i.split("-")[1])) for i in pending if i not in late]
    want += [new_record(i) for i in range(10)]
    assert sorted(got) == sorted(want)  # each once, every field as written
    store = TimerStore.open(directory, SETTINGS, clock)  # v1 and v2 segments together
    assert store.stats().pending == 0 and drain(store) == []
    store.close()


def test_a_v1_store_recovers_after_a_crash_with_new_records_in_it(tmp_path: Path) -> None:
    directory = copy_v1(tmp_path)
    clock = ManualClock(EXPECTED["now_ms"])
    store = TimerStore.open(directory, SETTINGS, clock)
    store.append([new_record(i) for i in range(5)])
    store.flush()
    store.append([new_record(i) for i in range(5, 10)])  # not flushed: lost in the crash
    store.abandon()
    store = TimerStore.open(directory, SETTINGS, clock)
    got = {r.id for r in drain_all(store, clock)}
    store.close()
    assert got == set(EXPECTED["pending"]) | {f"new-{i}" for i in range(5)}


CHILD = """
import sys
from pathlib import Path
from delaybridge.timerlog import ManualClock, TimerStore
from tests.unit.timerlog.fixtures.make_store_v1 import SETTINGS
from tests.unit.timerlog.test_timerlog_upgrade import new_record
store = TimerStore.open(Path(sys.argv[1]), SETTINGS, ManualClock(int(sys.argv[2])))
print("open", flush=True)
i = 0
while True:
    store.append([new_record(j) for j in range(i, i + 7)])
    i += 7
    if i % 14 == 0:
        store.flush()
        print(i, flush=True)
"""


@pytest.mark.parametrize("lines", [1, 2, 5])
def test_kill_9_during_the_first_appends_leaves_a_store_that_opens(
    tmp_path: Path, lines: int
) -> None:
    """SIGKILL after the open (the tail sealed, nothing new yet), after the first flush
    into a new version-2 segment, and a few segments later."""
    directory = copy_v1(tmp_path)
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
    flushed = int(said[-1]) if lines > 1 else 0
    clock = ManualClock(EXPECTED["now_ms"])
    store = TimerStore.open(directory, SETTINGS, clock)
    got = [r.id for r in drain_all(store, clock)]
    store.close()
    assert len(got) == len(set(got))
    news = {i for i in got if i.startswith("new-")}
    assert set(got) - news == set(EXPECTED["pending"])
    assert {f"new-{i}" for i in range(flushed)} <= news  # flushed before the kill: kept
    if lines > 1:
        assert list(versions(directory).values())[-1] == 2


def test_an_upgraded_store_without_its_checkpoint_is_rescued(tmp_path: Path) -> None:
    """The rescue (a checkpoint worked out from the files) reads version-1 and version-2
    segments side by side, the old one sealed short of its capacity."""
    directory = copy_v1(tmp_path)
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
    # At least once: everything pending, and maybe the delivered span again; the
    # cancels of the fixture were compacted into the cancel log and still hold.
    assert set(EXPECTED["pending"]) | {f"new-{i}" for i in range(5)} <= got
    assert not got & set(EXPECTED["cancelled"])
