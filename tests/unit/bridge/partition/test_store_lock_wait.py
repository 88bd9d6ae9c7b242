"""A store another process still holds is waited for at assign, not failed at once.

Two workers of one pod share the data directory; when one loses a partition (its
session expired while it was busy) the group may hand it to the other before the first
has closed the store. The new owner waits for the lock (up to ``LOCK_WAIT_S``) instead
of crashing; a lock held for good still fails, naming the store. (``flock`` locks are
per open file, so a second open in this process stands in for the other worker.)
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from delaybridge.bridge.partition import state as partition
from delaybridge.bridge.partition.state import open_partition
from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from delaybridge.timerlog.errors import StoreLocked
from tests.support import wait_until


def test_assign_waits_for_the_other_worker_to_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(1_000)
    settings = StoreSettings()
    held = TimerStore.open(tmp_path / "delay-0", settings, clock)
    tries: list[int] = []
    real_open = TimerStore.open

    def counting_open(*args: object, **kwargs: object) -> TimerStore:
        tries.append(1)
        return real_open(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(TimerStore, "open", counting_open)
    opened: list[object] = []
    opener = threading.Thread(
        target=lambda: opened.append(open_partition(tmp_path, "delay", 0, settings, clock, 0))
    )
    opener.start()
    wait_until(lambda: len(tries) >= 2, 10, "the new owner found the store locked")
    held.close()
    opener.join(10)
    assert len(opened) == 1
    opened[0].close()  # type: ignore[attr-defined]


def test_a_lock_held_for_good_still_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partition, "LOCK_WAIT_S", 0.3)
    clock = ManualClock(1_000)
    settings = StoreSettings()
    held = TimerStore.open(tmp_path / "delay-0", settings, clock)
    try:
        with pytest.raises(StoreLocked, match="delay-0"):
            open_partition(tmp_path, "delay", 0, settings, clock, 0)
    finally:
        held.close()
