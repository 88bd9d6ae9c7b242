"""The disk's pause of ingest has hysteresis (bridge/disk_pause.py, issue 25 item 4).

Before, ingest resumed at the first check that found free space at or over
``store.min_free_bytes``: with ``min_free_bytes: 0`` that was every check, so each
flush interval resumed, the same records were fetched again, the append was refused
again, and ingest paused again -- 1,560 times in six minutes on the issue's volume.
"""

from __future__ import annotations

from delaybridge.bridge.disk_pause import (
    FALSE_RESUME_S,
    WAIT_MAX_S,
    WAIT_MIN_S,
    DiskPause,
)

MIB = 1 << 20
VOLUME = 1024 * MIB


class Clock:
    def __init__(self) -> None:
        self.s = 1_000.0

    def __call__(self) -> float:
        return self.s


def test_free_space_under_the_floor_pauses_and_only_the_margin_over_it_resumes() -> None:
    clock = Clock()
    disk = DiskPause(min_free_bytes=100 * MIB, resume_margin_bytes=64 * MIB, clock_s=clock)
    assert disk.check(200 * MIB, VOLUME) is None and not disk.paused
    assert disk.check(99 * MIB, VOLUME) is True and disk.paused
    for free in (100, 120, 163):  # over the floor, under floor + margin: still paused
        clock.s += 0.3
        assert disk.check(free * MIB, VOLUME) is None and disk.paused
    assert disk.check(164 * MIB, VOLUME) is False and not disk.paused
    assert disk.pauses == 1
    assert disk.check(99 * MIB, VOLUME) is True  # paused again within 30 s: wait 2 s
    clock.s += 1.9
    assert disk.check(100 * MIB, VOLUME) is None
    clock.s += 0.1
    assert disk.check(100 * MIB, VOLUME) is False  # the floor, after the wait


def test_a_refused_append_resumes_once_it_fits_with_the_margin_at_any_floor() -> None:
    clock = Clock()
    disk = DiskPause(min_free_bytes=0, resume_margin_bytes=64 * MIB, clock_s=clock)
    assert disk.refused(("delay", 0), 10 * MIB) is True
    assert disk.refused(("delay", 1), 5 * MIB) is False  # already paused: one pause
    assert disk.resume_level() == 15 * MIB + 64 * MIB
    assert disk.check(78 * MIB, VOLUME) is None  # the floor (0) alone would resume here
    assert disk.check(79 * MIB, VOLUME) is False
    assert disk.pauses == 1


def test_short_of_the_margin_it_resumes_when_the_refused_records_fit_after_a_wait() -> None:
    clock = Clock()
    disk = DiskPause(min_free_bytes=8 * MIB, resume_margin_bytes=64 * MIB, clock_s=clock)
    disk.refused("p0", 2 * MIB)
    assert disk.check(9 * MIB, VOLUME) is None  # they do not fit yet
    clock.s += WAIT_MIN_S
    assert disk.check(9 * MIB, VOLUME) is None
    assert disk.check(10 * MIB, VOLUME) is False  # 8 + 2 free, and the wait is over


def test_each_resume_the_disk_cannot_hold_doubles_the_wait_and_a_lasting_one_resets_it() -> None:
    clock = Clock()
    disk = DiskPause(min_free_bytes=0, resume_margin_bytes=64 * MIB, clock_s=clock)
    waits = []
    for _ in range(10):  # refused again right after each tight resume
        disk.refused("p0", MIB)
        waits.append(disk.wait_s)
        clock.s += disk.wait_s - 0.001
        assert disk.check(2 * MIB, VOLUME) is None  # not before the wait is over
        clock.s += 0.001
        assert disk.check(2 * MIB, VOLUME) is False
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]
    assert WAIT_MIN_S == 1 and WAIT_MAX_S == 60
    clock.s += FALSE_RESUME_S  # this resume held
    disk.refused("p0", MIB)
    assert disk.wait_s == WAIT_MIN_S


def test_the_margin_is_at_most_an_eighth_of_the_volume() -> None:
    disk = DiskPause(min_free_bytes=8 * MIB, resume_margin_bytes=64 * MIB, clock_s=Clock())
    disk.check(4 * MIB, 113 * MIB)  # the volume
    assert disk.paused and disk.resume_level() == 8 * MIB + 113 * MIB // 8
    assert disk.short
    disk.check(30 * MIB, 113 * MIB)
    assert not disk.paused and not disk.short


def test_the_note_says_why_and_when_it_resumes_and_is_empty_while_running() -> None:
    disk = DiskPause(min_free_bytes=8 * MIB, resume_margin_bytes=64 * MIB, clock_s=Clock())
    assert disk.note == ""
    disk.refused("p0", MIB)
    disk.check(5 * MIB, VOLUME)
    assert disk.note.startswith("ingest paused: the data volume is short of space (5.0 MiB free")
    assert "resumes at 73.0 MiB free, or at 9.0 MiB after 1 s" in disk.note
    disk.check(100 * MIB, VOLUME)
    assert disk.note == ""
