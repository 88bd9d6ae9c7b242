"""The disk's pause of ingest has hysteresis (bridge/disk_pause.py, issue 25 item 4).

Before, ingest resumed at the first check that found free space at or over
``store.min_free_bytes``: with ``min_free_bytes: 0`` that was every check, so each
flush interval resumed, the same records were fetched again, the append was refused
again, and ingest paused again -- 1,560 times in six minutes on the issue's volume.
"""

from __future__ import annotations

from delaybridge.bridge.disk_pause import (
    HELD_S,
    TIGHT_AFTER_S,
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
        clock.s += 5
        assert disk.check(free * MIB, VOLUME) is None and disk.paused
    assert disk.check(164 * MIB, VOLUME) is False and not disk.paused
    assert disk.pauses == 1


def test_a_pause_lasts_its_wait_even_with_room_to_spare() -> None:
    clock = Clock()
    disk = DiskPause(min_free_bytes=0, resume_margin_bytes=64 * MIB, clock_s=clock)
    assert disk.refused(("delay", 0), 10 * MIB) is True
    assert disk.refused(("delay", 1), 5 * MIB) is False  # already paused: one pause
    assert disk.resume_level() == 15 * MIB + 64 * MIB
    assert disk.check(500 * MIB, VOLUME) is None  # room, but not a second yet
    clock.s += WAIT_MIN_S
    assert disk.check(78 * MIB, VOLUME) is None  # the floor (0) alone would resume here
    assert disk.check(79 * MIB, VOLUME) is False
    assert disk.pauses == 1


def test_pauses_that_follow_resumes_wait_ever_longer_and_a_resume_that_holds_resets() -> None:
    clock = Clock()
    disk = DiskPause(min_free_bytes=8 * MIB, resume_margin_bytes=64 * MIB, clock_s=clock)
    waits = []
    for _ in range(8):  # the volume cannot keep up: each resume fills it again at once
        assert disk.check(7 * MIB, VOLUME) is True
        waits.append(disk.wait_s)
        clock.s += disk.wait_s - 0.01
        assert disk.check(500 * MIB, VOLUME) is None  # not before the wait is over
        clock.s += 0.01
        assert disk.check(500 * MIB, VOLUME) is False
        clock.s += 0.5
    assert waits == [1, 2, 4, 8, 10, 10, 10, 10]
    assert WAIT_MIN_S == 1 and WAIT_MAX_S == 10
    clock.s += HELD_S  # this resume held
    disk.check(7 * MIB, VOLUME)
    assert disk.wait_s == WAIT_MIN_S


def test_without_the_margin_it_resumes_once_the_refused_record_fits_after_the_longest_wait() -> (
    None
):
    """A volume kept nearly full by messages due later never frees the margin."""
    clock = Clock()
    disk = DiskPause(min_free_bytes=8 * MIB, resume_margin_bytes=64 * MIB, clock_s=clock)
    disk.refused("p0", MIB // 10)
    clock.s += TIGHT_AFTER_S - 1
    assert disk.check(9 * MIB, VOLUME) is None  # fits, but the longest wait is not over
    clock.s += 1
    assert disk.check(8 * MIB, VOLUME) is None  # over, but it does not fit
    assert disk.check(8 * MIB + MIB // 10, VOLUME) is False


def test_the_margin_is_at_most_an_eighth_of_the_volume() -> None:
    clock = Clock()
    disk = DiskPause(min_free_bytes=8 * MIB, resume_margin_bytes=64 * MIB, clock_s=clock)
    disk.check(4 * MIB, 113 * MIB)  # the volume
    assert disk.paused and disk.resume_level() == 8 * MIB + 113 * MIB // 8
    assert disk.short
    clock.s += WAIT_MIN_S
    disk.check(30 * MIB, 113 * MIB)
    assert not disk.paused and not disk.short


def test_the_note_says_why_and_when_it_resumes_and_is_empty_while_running() -> None:
    disk = DiskPause(min_free_bytes=8 * MIB, resume_margin_bytes=64 * MIB, clock_s=Clock())
    assert disk.note == ""
    disk.refused("p0", MIB)
    disk.check(5 * MIB, VOLUME)
    assert disk.note.startswith("ingest paused: the data volume is short of space (5.0 MiB free")
    assert "resumes after 1 s at 73.0 MiB free, or after 30 s at 9.0 MiB" in disk.note
    disk._clock_s = lambda: 2_000.0
    disk.check(100 * MIB, VOLUME)
    assert disk.note == ""
