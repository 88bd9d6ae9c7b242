"""What a store keeps resident: the whole-wheel scans must not pin the wheel in RSS.

The default wheel is 864,000 slots (27.6 MB). Recovery checks every slot, and the flush
recomputes where pending data starts with a pass over all of them; each pass faults
the whole file into the process. An idle store then counted 27 MB of RSS, a worker
with four partitions over 100 MB, which the sidecar's RSS bound pays for nothing.
"""

from __future__ import annotations

from pathlib import Path

from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from tests.unit.timerlog.support import START_MS, rec

MB = 1 << 20


def _resident(path: Path) -> int:
    """Bytes of ``path`` mapped and resident in this process (``/proc/self/smaps``)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split(maxsplit=1)[0]
        if "-" in first and not first.endswith(":"):
            inside = line.rstrip().endswith(str(path))
        elif inside and first == "Rss:":
            total += int(line.split()[1]) * 1024
    return total


def test_the_wheel_does_not_stay_resident_after_a_flush_or_a_reopen(tmp_path: Path) -> None:
    settings = StoreSettings()  # the default, full-size wheel
    clock = ManualClock(START_MS)
    wheel = tmp_path / "s" / "wheel"
    store = TimerStore.open(tmp_path / "s", settings, clock)
    try:
        store.append([rec(f"m{i}", START_MS + 60_000 * i, offset=i) for i in range(100)])
        assert settings.wheel_slots * 32 > 20 * MB
        store.flush(recompute_live=True)  # a pass over every slot
        assert _resident(wheel) < 2 * MB
    finally:
        store.close()
    store = TimerStore.open(tmp_path / "s", settings, clock)  # recovery checks every slot
    try:
        assert store.stats().pending == 100
        assert _resident(wheel) < 2 * MB
    finally:
        store.abandon()
    store = TimerStore.open(tmp_path / "s", settings, clock)  # after a crash: rebuilt
    try:
        assert store.stats().pending == 100
        assert _resident(wheel) < 2 * MB
    finally:
        store.close()
