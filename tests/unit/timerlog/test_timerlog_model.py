"""The store against a simple model (a heap of pending messages), driven by hypothesis.

Random appends (delays past the window, equal due times, due times in the past; small
records and records of several blocks), cancels (right topic, wrong topic, any topic,
unknown ids), clock advances, partial takes, marks delivered, flushes that give back
the space of what is finished (timerlog/reclaim.py: the dead prefix, and the inside of
large records finished out of order), clean reopens and crashes after a flush.
Invariants: exactly the model's deliveries, each with its value intact (nothing
pending was ever punched out), never early, arrival order within a tick, no record
found damaged, and after a crash only in-flight messages come again.
HYPOTHESIS_DEEP=1 runs many more examples.
"""

from __future__ import annotations

import heapq
import os
import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from delaybridge.timerlog import DueRecord, ManualClock, StoreSettings, TimerStore
from tests.unit.timerlog.support import START_MS, rec

DEEP = os.environ.get("HYPOTHESIS_DEEP") == "1"
SETTINGS = StoreSettings(
    tick_ms=100,
    wheel_slots=32,
    commit_segment_bytes=4096,
    timer_segment_entries=64,
    cancel_grace_ms=0,
)
TICK = SETTINGS.tick_ms
TOPICS = ("a", "b")
# Delays in ms: past, now, same-tick clusters, inside and beyond the 3.2 s window.
delays = st.one_of(
    st.integers(-5_000, 0),
    st.sampled_from([0, 50, 100, 1_000, 3_150, 3_300]),
    st.integers(0, 40_000).map(lambda d: d // 50 * 50),
)
SIZES = (100, 9_000, 20_000, 20_000)  # one block, and records with whole blocks inside


def value_of(seq: int, size: int) -> bytes:
    return bytes([seq % 251]) * size


class Pending(NamedTuple):
    """A message the model expects (heap order: due time, then arrival)."""

    due_ms: int
    seq: int
    id: str
    topic: str


def ceil_tick(ms: int) -> int:
    return -(-ms // TICK) * TICK


class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="dbmodel-"))
        self.clock = ManualClock(START_MS)
        self.store = TimerStore.open(self.dir, SETTINGS, self.clock)
        self.seq = 0
        self.pending: list[Pending] = []  # a heap: the model of what must come out
        self.appended_at: dict[int, int] = {}
        self.cancelled: set[int] = set()
        self.inflight: list[DueRecord] = []
        self.delivered: set[str] = set()
        self.last_by_tick: dict[int, int] = {}
        self.sizes: dict[int, int] = {}

    def teardown(self) -> None:
        self.store.close()  # a no-op on a closed store
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        ds=st.lists(
            st.tuples(delays, st.sampled_from(TOPICS), st.sampled_from(SIZES)),
            min_size=1,
            max_size=8,
        )
    )
    def append(self, ds: list[tuple[int, str, int]]) -> None:
        now = self.clock.now_ms()
        batch = []
        for delay, topic, size in ds:
            self.seq += 1
            self.sizes[self.seq] = size
            value = value_of(self.seq, size)
            batch.append(
                rec(f"m{self.seq}", now + delay, topic=topic, offset=self.seq, value=value)
            )
            heapq.heappush(self.pending, Pending(now + delay, self.seq, f"m{self.seq}", topic))
            self.appended_at[self.seq] = now
        self.store.append(batch)

    @rule(pick=st.integers(0, 10_000), how=st.sampled_from(["same", "other", "any", "unknown"]))
    def cancel(self, pick: int, how: str) -> None:
        if how == "unknown" or self.seq == 0:
            assert self.store.cancel([("nobody", None)]) == [False]
            return
        seq = pick % self.seq + 1
        entry = next((p for p in self.pending if p.seq == seq), None)
        topic = entry.topic if entry else "a"
        asked = {"same": topic, "other": "b" if topic == "a" else "a", "any": None}[how]
        expect = entry is not None and seq not in self.cancelled and asked in (topic, None)
        assert self.store.cancel([(f"m{seq}", asked)]) == [expect]
        if expect:
            self.cancelled.add(seq)

    @rule(ms=st.sampled_from([1, 49, 50, 99, 100, 101, 700, 3_200, 3_300, 9_999]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(short=st.booleans())
    def reclaim(self, short: bool) -> None:
        """A flush that recounts the live start and gives back what is finished."""
        self.store.space_short = short
        self.store.flush(recompute_live=True)

    @rule(n=st.integers(1, 7), mark=st.booleans())
    def take(self, n: int, mark: bool) -> None:
        got = self.store.take_due(n)
        assert len(got) <= n
        self._check(got)
        self.inflight += got
        if mark and self.inflight:
            self.store.mark_delivered(self.inflight[-1].cursor)
            self.inflight.clear()

    @rule()
    def drain(self) -> None:
        """Everything the model says is due must come out now, and nothing else."""
        if self.inflight:
            self.store.mark_delivered(self.inflight[-1].cursor)
            self.inflight.clear()
        now = self.clock.now_ms()
        got: list[DueRecord] = []
        while batch := self.store.take_due(5):
            self._check(batch)
            got += batch
            self.store.mark_delivered(batch[-1].cursor)
        # Due times round up to a tick; past-due lands one tick after the reader.
        must = {
            p.id
            for p in self.pending
            if p.seq not in self.cancelled
            and max(ceil_tick(p.due_ms), self.appended_at[p.seq] // TICK * TICK + TICK) <= now
        }
        out = {d.record.id for d in got}
        assert must <= out | self.delivered, must - out - self.delivered

    def _check(self, got: list[DueRecord]) -> None:
        now = self.clock.now_ms()
        for d in got:
            r = d.record
            assert r.due_ms <= now, f"{r.id} early: due {r.due_ms} now {now}"
            assert r.id not in self.delivered, f"{r.id} delivered twice"
            seq = r.source_offset
            assert seq not in self.cancelled, f"{r.id} was cancelled"
            assert r.value == value_of(seq, self.sizes[seq]), f"{r.id} came back damaged"
            tick = ceil_tick(r.due_ms)
            assert self.last_by_tick.get(tick, 0) < seq, f"{r.id} out of order in tick {tick}"
            self.last_by_tick[tick] = seq
            self.delivered.add(r.id)
        self.pending = [p for p in self.pending if p.id not in self.delivered]
        heapq.heapify(self.pending)

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        """Clean close, or flush then crash: in-flight messages come back, nothing else."""
        if clean:
            if self.inflight:
                self.store.mark_delivered(self.inflight[-1].cursor)
                self.inflight.clear()
            self.store.close()
        else:
            self.store.flush()
            self.store.abandon()
            for r in (d.record for d in self.inflight):
                self.delivered.discard(r.id)
                heapq.heappush(
                    self.pending, Pending(r.due_ms, r.source_offset, r.id, r.target_topic)
                )
                tick = ceil_tick(r.due_ms)
                self.last_by_tick[tick] = min(self.last_by_tick.get(tick, 0), r.source_offset - 1)
            self.inflight.clear()
        self.store = TimerStore.open(self.dir, SETTINGS, self.clock)
        assert self.store.last_source_offset == (self.seq or -1)

    @precondition(lambda self: not self.inflight)
    @invariant()
    def counts(self) -> None:
        live = [p for p in self.pending if p.seq not in self.cancelled]
        stats = self.store.stats()
        assert stats.pending == len(live)
        assert stats.corrupt_records_total == 0


StoreModel.TestCase.settings = settings(
    max_examples=400 if DEEP else 40,
    stateful_step_count=60 if DEEP else 30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStoreModel = StoreModel.TestCase
