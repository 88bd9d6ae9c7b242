"""``delaybridge bench listing``: time pages of the pending listing in a big store.

1. Fill a store (default settings: one-day window) with N pending messages in batches
   of 1,000, arriving over two simulated hours (the clock advances and the reader
   moves between batches, as in a sidecar): 90 % due 2 to 23 hours after arrival, 10 %
   25 to 72 hours after (rolled: ROLL entries, spread over the window's far edge as it
   moves); four target topics; ids ``<hex digit>-order-<n>`` so an id prefix can
   select 1/16 of them or a handful.
2. Time pages of ``limit`` (default 100), each ``repeat`` times (median and max):
   the first page; a page deep in (a cursor 12 hours ahead); a topic filter (1 of 4);
   an id prefix matching 1/16; a rare id prefix (a few hundred matches in N: pages stop
   at the work budget and return partial); the first page of the rolled part; and the
   per-store stats (wheel histogram).
3. Report a table and JSON, with the calibration loop of ``bench store`` so numbers
   from a busy machine can be compared as ratios. The store is deleted afterwards.
"""

from __future__ import annotations

import random
import shutil
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from delaybridge.timerlog.bench import HOUR_MS, START_MS, calibrate
from delaybridge.timerlog.clock import ManualClock
from delaybridge.timerlog.list_cursor import START, Part, Position
from delaybridge.timerlog.listing import Filter, list_pending
from delaybridge.timerlog.pending_stats import histogram
from delaybridge.timerlog.records import TimerRecord
from delaybridge.timerlog.settings import StoreSettings
from delaybridge.timerlog.store import TimerStore

BATCH = 1_000
TOPICS = ("orders", "reminders", "invoices", "alerts")
VALUE = b"v" * 100


@dataclass
class Timing:
    case: str
    median_ms: float
    max_ms: float
    items: int
    examined: int
    partial: bool


@dataclass
class ListingBenchResult:
    pending: int
    limit: int
    fill_s: float
    timings: list[Timing] = field(default_factory=list)
    calibration_s: float = 0.0

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def _batch(first: int, now_ms: int, rnd: random.Random) -> list[TimerRecord]:
    out = []
    for o in range(first, first + BATCH):
        far = o % 10 == 9
        due = now_ms + (
            rnd.randrange(25 * HOUR_MS, 72 * HOUR_MS)
            if far
            else rnd.randrange(2 * HOUR_MS, 23 * HOUR_MS)
        )
        topic = TOPICS[o % len(TOPICS)]
        out.append(
            TimerRecord(f"{o % 16:x}-order-{o}", due, topic, -1, b"k%d" % o, VALUE, (), o, now_ms)
        )
    return out


def fill_store(
    directory: Path, pending: int, clock: ManualClock, progress: object | None = None
) -> TimerStore:
    """A new store in ``directory`` holding ``pending`` messages (step 1 of the module
    docstring), flushed; the caller closes it. Shared with ``bench prefix``."""
    from rich.progress import Progress

    prog = progress if isinstance(progress, Progress) else None
    shutil.rmtree(directory, ignore_errors=True)
    rnd = random.Random(7)
    store = TimerStore.open(directory, StoreSettings(), clock)
    task = prog.add_task(f"fill {pending:,}", total=pending) if prog else None
    step_ms = max(1, 2 * HOUR_MS * BATCH // pending)
    try:
        for first in range(0, pending, BATCH):
            store.append(_batch(first, clock.now_ms(), rnd))
            clock.advance(step_ms)
            if due := store.take_due(BATCH):  # nothing is due yet: the reader moves on
                store.mark_delivered(due[-1].cursor)
            if (first // BATCH) % 50 == 0:
                store.flush()
                store.release_pages()
            if prog and task is not None:
                prog.update(task, advance=BATCH)
        store.flush()
    except BaseException:
        store.close()
        raise
    return store


def run_listing(
    pending: int, work: Path, limit: int = 100, repeat: int = 20, progress: object | None = None
) -> ListingBenchResult:
    directory = work / f"listing-{pending}"
    clock = ManualClock(START_MS)
    t0 = time.perf_counter()
    store = fill_store(directory, pending, clock, progress)
    try:
        result = ListingBenchResult(pending, limit, round(time.perf_counter() - t0, 1))
        deep = Position.before_tick(Part.WINDOW, clock.now_ms() + 12 * HOUR_MS)
        rolled = Position.before_tick(Part.ROLLED, 0)
        rare = f"5-order-{pending // 3}"[:-2]  # ~100 ids in 10M: mostly partial pages
        cases = [
            ("first page", START, Filter()),
            ("deep page (cursor +12 h)", deep, Filter()),
            ("topic filter (1 of 4)", START, Filter(topic="invoices")),
            ("topic filter, deep", deep, Filter(topic="invoices")),
            ("id prefix (1 of 16)", START, Filter(id_prefix="a-")),
            (f"rare id prefix {rare!r}", START, Filter(id_prefix=rare)),
            ("rolled part, first page", rolled, Filter()),
        ]
        for name, after, flt in cases:
            result.timings.append(_time(store, name, after, flt, limit, repeat))
        samples = []
        for _ in range(max(3, repeat // 4)):
            h0 = time.perf_counter()
            histogram(store, clock.now_ms())
            samples.append((time.perf_counter() - h0) * 1000)
        result.timings.append(
            Timing(
                "stats: wheel histogram",
                round(statistics.median(samples), 2),
                round(max(samples), 2),
                0,
                store.wheel.n_slots,
                False,
            )
        )
        result.calibration_s = round(calibrate()[0], 2)
        return result
    finally:
        store.close()
        shutil.rmtree(directory, ignore_errors=True)


def _time(
    store: TimerStore, name: str, after: Position, flt: Filter, limit: int, repeat: int
) -> Timing:
    samples = []
    page = None
    for _ in range(repeat):
        store.release_pages()  # the sidecar drops mapped pages too: not all from RSS
        t0 = time.perf_counter()
        page = list_pending(store, "delay-0", after, flt, limit)
        samples.append((time.perf_counter() - t0) * 1000)
    assert page is not None
    return Timing(
        name,
        round(statistics.median(samples), 2),
        round(max(samples), 2),
        len(page.items),
        page.examined,
        page.partial,
    )
