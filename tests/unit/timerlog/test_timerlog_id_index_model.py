"""The id index finds exactly what a scan of the timer log finds, driven by hypothesis.

Random appends (ids reused, so a hash has several entries; batches bigger than a
segment), cancels, deliveries and rolls (a 3.2 s window), flushes, clean reopens,
crashes after a flush and crashes that lose appends the index had already sealed runs
of (also while index writes fail: runs held in memory, stale slots left on disk), and
damaged index files between runs (deleted, truncated, a slot zeroed, a slot
that claims its run but sorts other hashes, a flipped row). Invariant, after every
step: :meth:`TimerLog.find_ids` (the index) returns the same hits as
:meth:`TimerLog.scan_ids` (the scan the index replaced), from ``live_start`` and from
the log's first entry. HYPOTHESIS_DEEP=1 runs many more examples.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import zlib
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from delaybridge.fileformat import HEADER_SIZE
from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from delaybridge.timerlog.id_index_file import IndexFile, slot_bytes
from tests.unit.timerlog.support import START_MS, drain, rec

DEEP = os.environ.get("HYPOTHESIS_DEEP") == "1"
RUN = 16
SETTINGS = StoreSettings(
    tick_ms=100,
    wheel_slots=32,
    commit_segment_bytes=4096,
    timer_segment_entries=64,
    cancel_grace_ms=0,
    index_run_entries=RUN,
)
DAMAGE = ("delete", "truncate", "zero", "stale", "row")


def damage(directory: Path, how: str, pick: int) -> None:
    """Spoil one index file of a closed store the way a crash or an operator might."""
    files = sorted((directory / "timerlog").glob("*.tidx"))
    if not files:
        return
    path = files[pick % len(files)]
    size = path.stat().st_size
    slots = (size - HEADER_SIZE) // slot_bytes(RUN)
    slot = HEADER_SIZE + (pick // 7 % max(1, slots)) * slot_bytes(RUN)
    with path.open("r+b") as f:
        if how == "delete":
            path.unlink()
        elif how == "truncate":
            f.truncate(size // 2)
        elif how == "zero":
            f.seek(slot)
            f.write(bytes(slot_bytes(RUN)))
        elif how == "stale":  # sorted, trailer intact, but not the run's hashes
            f.seek(slot)
            f.write(b"".join(i.to_bytes(4, "little") for i in range(RUN)))
        else:  # two rows swapped: the hashes beside them no longer match
            f.seek(slot + 4 * RUN)
            a, b = f.read(2), f.read(2)
            f.seek(slot + 4 * RUN)
            f.write(b + a)


def no_space(*args: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device (injected)")


class IndexModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="dbidx-"))
        self.clock = ManualClock(START_MS)
        self.store = TimerStore.open(self.dir, SETTINGS, self.clock)
        self.offset = 0
        self.ids: set[str] = set()

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        n=st.integers(1, 90),
        ids=st.integers(1, 400),
        delay=st.sampled_from([-1_000, 0, 100, 1_500, 3_300, 20_000]),
    )
    def append(self, n: int, ids: int, delay: int) -> None:
        batch = []
        for _ in range(n):
            self.offset += 1
            id = f"m{self.offset % ids}"
            self.ids.add(id)
            due = self.clock.now_ms() + delay + self.offset % 7 * 100
            batch.append(rec(id, due, offset=self.offset, value=b"v"))
        self.store.append(batch)

    @rule(pick=st.integers(0, 1_000), k=st.integers(1, 5))
    def cancel(self, pick: int, k: int) -> None:
        ids = sorted(self.ids)
        if ids:
            self.store.cancel([(ids[(pick + j) % len(ids)], None) for j in range(k)])

    @rule(ms=st.sampled_from([100, 700, 3_300, 9_900]))
    def deliver(self, ms: int) -> None:
        self.clock.advance(ms)
        drain(self.store)

    @rule()
    def flush(self) -> None:
        self.store.flush(recompute_live=True)

    @rule(how=st.sampled_from(["close", "flush-crash", "crash"]))
    def reopen(self, how: str) -> None:
        """ "crash" loses what was appended since the last flush, runs sealed of it too."""
        if how == "close":
            self.store.close()
        else:
            if how == "flush-crash":
                self.store.flush()
            self.store.abandon()
        self.store = TimerStore.open(self.dir, SETTINGS, self.clock)

    @rule(n=st.integers(1, 40))
    def crash_with_index_writes_failing(self, n: int) -> None:
        """A full disk for the index only (its runs held in memory), a flush, a crash:
        slots left from before an earlier crash now claim flushed runs."""
        write = IndexFile.write
        IndexFile.write = no_space  # type: ignore[method-assign, assignment]
        try:
            self.append(n, 400, 20_000)
            self.store.flush()
            self.store.abandon()
        finally:
            IndexFile.write = write  # type: ignore[method-assign]
        self.store = TimerStore.open(self.dir, SETTINGS, self.clock)

    @rule(how=st.sampled_from(DAMAGE), pick=st.integers(0, 1_000), clean=st.booleans())
    def damaged_reopen(self, how: str, pick: int, clean: bool) -> None:
        if clean:
            self.store.close()
        else:
            self.store.abandon()
        damage(self.dir, how, pick)
        self.store = TimerStore.open(self.dir, SETTINGS, self.clock)

    @invariant()
    def index_finds_what_a_scan_finds(self) -> None:
        timer = self.store.timer
        hashes = {zlib.crc32(i.encode()) for i in self.ids} | {0, 0xFFFFFFFF}
        for start in (self.store._flusher.live_start, timer.start):
            assert timer.find_ids(start, hashes) == timer.scan_ids(start, hashes), start


IndexModel.TestCase.settings = settings(
    max_examples=300 if DEEP else 50,
    stateful_step_count=60 if DEEP else 30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestIndexModel = IndexModel.TestCase
