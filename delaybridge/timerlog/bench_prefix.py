"""``delaybridge bench prefix``: the cost of a cancel by id prefix in a big store.

1. Fill a store exactly as ``bench listing`` does (``bench_listing.fill_store``): N
   pending messages, ids ``<hex digit>-order-<n>``, 10 % beyond the one-day window.
2. Time, each ``repeat`` times (median and max):
   - the *count* of a rare prefix (about a hundred matches in N) against the default cap
     (1,000), in steps of ``budget`` entries as the sidecar runs it before a bulk cancel
     (``bridge/cancels/prefix.py``): the whole store is walked;
   - the count of a prefix matching 1/16 of the store: stopped past the cap, what a
     refused request costs;
3. Sweep the rare prefix, then a 1/16 prefix, to the end in steps of ``budget`` entries
   (the loop turn's share, ``cancels.prefix_sweep_entries``): each step timed (median,
   max: what one loop turn's deliveries may wait), the number of steps and the total.
4. Report a table and JSON with the calibration loop of ``bench store``. The store is
   deleted afterwards.
"""

from __future__ import annotations

import shutil
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from delaybridge.timerlog.bench import START_MS, calibrate
from delaybridge.timerlog.bench_listing import fill_store
from delaybridge.timerlog.clock import ManualClock
from delaybridge.timerlog.prefix_sweep import DEFAULT_BUDGET
from delaybridge.timerlog.records import Cancel
from delaybridge.timerlog.store import TimerStore

CAP = 1_000


@dataclass
class Timing:
    case: str
    median_ms: float
    max_ms: float
    matched: int
    steps: int = 1
    total_s: float = 0.0


@dataclass
class PrefixBenchResult:
    pending: int
    budget: int
    fill_s: float
    timings: list[Timing] = field(default_factory=list)
    calibration_s: float = 0.0

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def run_prefix(
    pending: int,
    work: Path,
    budget: int = DEFAULT_BUDGET,
    repeat: int = 5,
    progress: object | None = None,
) -> PrefixBenchResult:
    directory = work / f"prefix-{pending}"
    clock = ManualClock(START_MS)
    t0 = time.perf_counter()
    store = fill_store(directory, pending, clock, progress)
    try:
        result = PrefixBenchResult(pending, budget, round(time.perf_counter() - t0, 1))
        sent = clock.now_ms() + 1  # after every message: the rule lets each one go
        rare = f"5-order-{pending // 3}"[:-2]
        wide = "a-"
        rare_cancel = Cancel(rare, None, sent, prefix=True)
        wide_cancel = Cancel(wide, None, sent, prefix=True)
        counts = [
            (f"count, rare prefix {rare!r}, cap {CAP:,}: step", rare_cancel, CAP),
            (f"count, prefix {wide!r} (1/16), cap {CAP:,}: step", wide_cancel, CAP),
        ]
        for name, cancel, cap in counts:
            result.timings.append(_count(store, name, cancel, cap, budget, repeat))
        for prefix in (rare, wide):
            name = f"sweep {prefix!r}, one step of {budget:,} entries"
            result.timings.append(
                _sweep(store, name, Cancel(prefix, None, sent, prefix=True), budget)
            )
        result.calibration_s = round(calibrate()[0], 2)
        return result
    finally:
        store.close()
        shutil.rmtree(directory, ignore_errors=True)


def _count(
    store: TimerStore, name: str, cancel: Cancel, cap: int | None, budget: int, repeat: int
) -> Timing:
    """The count as the sidecar runs it: a step of ``budget`` entries per loop turn
    (``bridge/cancels/prefix.py``): the steps' median and max, their number, the total."""
    steps: list[float] = []
    totals: list[float] = []
    found = 0
    for _ in range(repeat):
        store.release_pages()  # the sidecar drops mapped pages too: not all in RSS
        count = store.start_count(cancel, cap)
        t0 = time.perf_counter()
        while not count.done:
            s0 = time.perf_counter()
            store.count_step(count, budget)
            steps.append((time.perf_counter() - s0) * 1000)
        totals.append(time.perf_counter() - t0)
        found = count.found
    return Timing(
        name,
        round(statistics.median(steps), 2),
        round(max(steps), 2),
        found,
        len(steps) // repeat,
        round(statistics.median(totals), 2),
    )


def _sweep(store: TimerStore, name: str, cancel: Cancel, budget: int) -> Timing:
    before = store.stats().cancelled_total
    store.cancel([cancel])
    samples = []
    t0 = time.perf_counter()
    while store.sweeping:
        s0 = time.perf_counter()
        store.sweep(budget)
        store.take_removed()  # as the sidecar's changelog takes them, every turn
        samples.append((time.perf_counter() - s0) * 1000)
    total = time.perf_counter() - t0
    store.flush()
    taken = store.stats().cancelled_total - before
    return Timing(
        name,
        round(statistics.median(samples), 2),
        round(max(samples), 2),
        taken,
        len(samples),
        round(total, 2),
    )
