"""``delaybridge bench store``: appends/s, deliveries/s, RSS, disk and recovery time.

For each requested number of pending messages N (default 1M and 10M):

1. create a store with default settings and a manual clock; append N messages in
   batches of 1,000 (100-byte values, due uniformly over the next 23 hours, so
   nothing rolls); time only the ``append`` calls; sample RSS every 5% of the way;
2. flush; measure the store's allocated bytes per pending message, and what of it
   is overhead beyond the message's own bytes (id, topic, key, value, headers);
3. simulate a crash (``abandon``: no clean close) and time ``open`` until the store is ready:
   this is the unclean path (every live timer entry checked, wheel rebuilt);
4. advance the clock so that the first ~``deliver`` messages are due and drain them
   with ``take_due(1000)`` + ``mark_delivered``; time it and sample RSS;
5. flush, recounting what is live, and measure the store's allocated bytes again: how
   much of the delivered messages' space came back, and what that flush cost.

RSS is reported two ways: ``rss_mb_max`` of samples taken right after the store let
its mapped pages go (what stays resident), and the true peak of each phase
(``VmHWM``, reset through ``/proc/self/clear_refs`` before it): mapped commit-log pages
read between two releases count in RSS until the next one, and random reads (due
order is not arrival order) fault in whole runs of neighbouring pages.

Rates are reported per wall second and per CPU second of this process; the
"calibration" figures (wall and CPU seconds for a 10M-iteration Python loop, ~0.4 s
on an idle modern core) say how busy the machine was.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from delaybridge.timerlog.clock import ManualClock
from delaybridge.timerlog.records import TimerRecord
from delaybridge.timerlog.settings import StoreSettings
from delaybridge.timerlog.store import TimerStore

BATCH = 1_000
VALUE = b"v" * 100
HOUR_MS = 3_600_000
START_MS = 1_700_000_000_000


@dataclass
class StoreBenchResult:
    pending: int
    append_per_s: float
    append_per_cpu_s: float
    deliver_count: int
    deliver_per_s: float
    deliver_per_cpu_s: float
    rss_mb_start: float
    rss_mb_max: float
    rss_mb_end: float
    rss_samples_mb: list[float]
    disk_bytes: int
    disk_bytes_per_record: float
    payload_bytes_per_record: float
    overhead_bytes_per_record: float
    recovery_s: float
    recovery_cpu_s: float
    wheel_rebuilt: bool
    calibration_s: float
    calibration_cpu_s: float
    rss_peak_mb_append: float | None = None
    """VmHWM over the appends (None: the peak could not be reset on this system)."""
    rss_peak_mb_deliver: float | None = None
    """VmHWM over the deliveries, mapped pages read between releases included."""
    disk_bytes_after_deliver: int | None = None
    """Allocated bytes after the deliveries and a flush that recounts what is live."""
    flush_after_deliver_s: float | None = None
    """That flush's wall time (fsyncs, the live recount, giving space back)."""
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def _status_mb(name: str) -> float:
    """A memory line of ``/proc/self/status`` (``VmRSS``, ``VmHWM``), in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(f"{name}:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{name} missing from /proc/self/status")


def rss_mb() -> float:
    return _status_mb("VmRSS")


def reset_peak() -> bool:
    """Start a new ``VmHWM`` peak (Linux: ``clear_refs`` 5); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def peak_mb() -> float:
    return _status_mb("VmHWM")


def _peak_since(reset: bool) -> float | None:
    """The peak since :func:`reset_peak` (None where it could not be reset)."""
    return round(peak_mb(), 1) if reset else None


def calibrate() -> tuple[float, float]:
    """(wall s, CPU s) of a 10M-iteration ``x += i`` loop: ~0.4 s each on an idle core."""
    start, cpu = time.perf_counter(), time.process_time()
    x = 0
    for i in range(10_000_000):
        x += i
    return time.perf_counter() - start, time.process_time() - cpu


def _batch(first: int, now_ms: int, rnd: random.Random) -> list[TimerRecord]:
    return [
        TimerRecord(
            f"delay-0-{o}",
            now_ms + rnd.randrange(1_000, 23 * HOUR_MS),
            "orders",
            -1,
            b"key-%d" % o,
            VALUE,
            (),
            o,
            now_ms,
        )
        for o in range(first, first + BATCH)
    ]


def run_one(
    pending: int, work: Path, deliver: int, progress: object | None = None
) -> StoreBenchResult:
    """Benchmark one store of ``pending`` messages in ``work`` (deleted afterwards)."""
    from rich.progress import Progress

    prog = progress if isinstance(progress, Progress) else None
    directory = work / f"store-{pending}"
    shutil.rmtree(directory, ignore_errors=True)
    clock = ManualClock(START_MS)
    settings = StoreSettings()
    rnd = random.Random(42)
    calibration, calibration_cpu = calibrate()
    rss_start = rss_mb()
    samples: list[float] = []
    payload = 0
    store = TimerStore.open(directory, settings, clock)
    task = prog.add_task(f"append {pending:,}", total=pending) if prog else None
    wall = cpu = 0.0
    step = max(BATCH, pending // 20)
    peaks = reset_peak()
    for first in range(0, pending, BATCH):
        batch = _batch(first, clock.now_ms(), rnd)
        payload += sum(
            len(r.id) + len(r.target_topic) + len(r.key or b"") + len(VALUE) for r in batch
        )
        w0, c0 = time.perf_counter(), time.process_time()
        store.append(batch)
        if (first // BATCH) % 50 == 0:
            store.flush()  # the sidecar flushes often; a flush per 50k messages here
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
        if first % step == 0:
            store.release_pages()
            samples.append(round(rss_mb(), 1))
        if prog and task is not None:
            prog.update(task, advance=BATCH)
    w0, c0 = time.perf_counter(), time.process_time()
    store.flush(recompute_live=True)
    wall += time.perf_counter() - w0
    cpu += time.process_time() - c0
    peak_append = _peak_since(peaks)
    disk = store.stats().bytes_on_disk
    store.abandon()
    t0, c0 = time.perf_counter(), time.process_time()
    store = TimerStore.open(directory, settings, clock)  # the unclean (crash) path
    recovery = time.perf_counter() - t0
    recovery_cpu = time.process_time() - c0
    rebuilt = store.wheel_rebuilt
    samples.append(round(rss_mb(), 1))
    # Deliver the earliest ~`deliver` messages: due times are uniform over 23 hours.
    want = min(deliver, pending)
    clock.advance(int(23 * HOUR_MS * want / pending))
    task = prog.add_task(f"deliver from {pending:,}", total=want) if prog else None
    got = 0
    peaks = reset_peak()
    w0, c0 = time.perf_counter(), time.process_time()
    while batch_out := store.take_due(1_000):
        store.mark_delivered(batch_out[-1].cursor)
        got += len(batch_out)
        if prog and task is not None:
            prog.update(task, advance=len(batch_out))
        if got % 100_000 < 1_000:
            store.release_pages()
            samples.append(round(rss_mb(), 1))
    d_wall, d_cpu = time.perf_counter() - w0, time.process_time() - c0
    peak_deliver = _peak_since(peaks)
    w0 = time.perf_counter()
    store.flush(recompute_live=True)
    flush_after = time.perf_counter() - w0
    disk_after = store.stats().bytes_on_disk
    store.close()
    samples.append(round(rss_mb(), 1))
    shutil.rmtree(directory, ignore_errors=True)
    return StoreBenchResult(
        pending=pending,
        append_per_s=round(pending / wall),
        append_per_cpu_s=round(pending / cpu),
        deliver_count=got,
        deliver_per_s=round(got / d_wall) if d_wall else 0.0,
        deliver_per_cpu_s=round(got / d_cpu) if d_cpu else 0.0,
        rss_mb_start=round(rss_start, 1),
        rss_mb_max=max(samples),
        rss_mb_end=samples[-1],
        rss_samples_mb=samples,
        disk_bytes=disk,
        disk_bytes_per_record=round(disk / pending, 1),
        payload_bytes_per_record=round(payload / pending, 1),
        overhead_bytes_per_record=round((disk - payload) / pending, 1),
        recovery_s=round(recovery, 2),
        recovery_cpu_s=round(recovery_cpu, 2),
        wheel_rebuilt=rebuilt,
        calibration_s=round(calibration, 2),
        calibration_cpu_s=round(calibration_cpu, 2),
        rss_peak_mb_append=peak_append,
        rss_peak_mb_deliver=peak_deliver,
        disk_bytes_after_deliver=disk_after,
        flush_after_deliver_s=round(flush_after, 3),
    )


def default_work_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"delaybridge-bench-{os.getpid()}"
