"""Delivered space comes back without waiting for a segment to fill (issue 25 item 4).

Before, whole segments were the only unit of deletion and the last one was never
deleted: a store whose first 64 MiB commit segment had not filled gave nothing back
however much it delivered, and on a small volume ingest stayed paused for good. Now a
flush gives back what the checkpoint it just wrote no longer needs (timerlog/reclaim.py):
the dead prefix of the active segments is punched out, and -- at each recount of the
live start, or at every flush while the owner says space is short -- the inside of
large records delivered out of arrival order too.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delaybridge import durable, file_space
from delaybridge.timerlog import ManualClock, StoreSettings, TimerRecord, TimerStore
from delaybridge.timerlog.space_reserve import RESERVE_BYTES
from delaybridge.wheel.wheel import CHUNK
from tests.unit.timerlog.faulty_disk import FaultyDisk
from tests.unit.timerlog.support import START_MS, drain, rec

DEEP = os.environ.get("HYPOTHESIS_DEEP") == "1"
KIB = 1024
MIB = 1024 * KIB
BIG = 100 * KIB  # the records
FIXED = 16 * KIB + CHUNK + RESERVE_BYTES
"""What any store holds: checkpoint, cancel log and headers, the wheel's first chunk (its
header's), the reserve. Messages due within a few minutes add a chunk or two."""
DEFAULTS = StoreSettings()  # 64 MiB commit segments, the one-day wheel


def big(i: int, due_ms: int) -> TimerRecord:
    return rec(f"m{i}", due_ms, offset=i, value=bytes([i % 251]) * BIG)


def disk(store: TimerStore) -> int:
    return store.stats().bytes_on_disk


def test_an_empty_store_costs_kilobytes(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    with TimerStore.open(tmp_path / "s", DEFAULTS, clock) as store:
        store.flush()
        # The wheel's first chunk, the cancel log, the checkpoint, the space reserve.
        assert disk(store) <= FIXED <= 128 * KIB
        store.append([rec("one", START_MS + 60_000)])
        store.flush()
        assert disk(store) <= FIXED + CHUNK + 16 * KIB
    total = sum(p.stat().st_blocks * 512 for p in (tmp_path / "s").rglob("*") if p.is_file())
    assert total <= FIXED + CHUNK + 16 * KIB


def test_delivered_space_comes_back_before_the_segment_fills(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    with TimerStore.open(tmp_path / "s", DEFAULTS, clock) as store:
        store.append([big(i, START_MS + 1_000 + i) for i in range(200)])  # 20 MB of 64 MiB
        store.flush()
        assert disk(store) >= 200 * BIG
        clock.advance(5_000)
        assert len(drain(store)) == 200
        store.flush(recompute_live=True)
        assert disk(store) <= FIXED + 2 * CHUNK
        assert store.stats().commit_segments == 1  # the active segment, punched out


def test_the_live_start_is_recounted_at_every_flush_while_space_is_short(
    tmp_path: Path,
) -> None:
    clock = ManualClock(START_MS)
    with TimerStore.open(tmp_path / "s", DEFAULTS, clock) as store:
        store.append([big(i, START_MS + 1_000 + i) for i in range(50)])
        store.flush()
        clock.advance(2_000)
        drain(store)
        store.flush()  # not recounted yet: within LIVE_RECOMPUTE_MS of the last
        assert disk(store) >= 50 * BIG
        store.space_short = True
        store.flush()
        assert disk(store) <= FIXED + 2 * CHUNK


def test_records_finished_out_of_arrival_order_give_back_their_inside(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    directory = tmp_path / "s"
    store = TimerStore.open(directory, DEFAULTS, clock)
    # Arrival order is the reverse of due order: the oldest record goes last, so the
    # dead prefix stays empty until the very end.
    store.append([big(i, START_MS + 100_000 - 1_000 * i) for i in range(60)])
    store.flush()
    clock.advance(100_000 - 30 * 1_000)
    assert [r.id for r in drain(store)] == [f"m{i}" for i in range(59, 29, -1)]
    store.space_short = True
    store.flush()
    # 30 still pending; of the 30 others only the block of each one's head is left.
    assert disk(store) <= 30 * BIG + 30 * 8 * KIB + FIXED + 2 * CHUNK
    assert store.stats().corrupt_records_total == 0
    store.abandon()  # a crash: the reopened store has exactly the 30 left, intact
    clock.advance(60_000)
    again = TimerStore.open(directory, DEFAULTS, clock, verify_commit_log=True)
    left = drain(again)
    assert [r.id for r in left] == [f"m{i}" for i in range(29, -1, -1)]
    assert all(r.value == bytes([int(r.id[1:]) % 251]) * BIG for r in left)
    assert again.stats().corrupt_records_total == 0
    again.close()


def test_small_records_come_back_with_the_dead_prefix(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    with TimerStore.open(tmp_path / "s", DEFAULTS, clock) as store:
        store.append([rec(f"s{i}", START_MS + 1_000, offset=i) for i in range(20_000)])
        store.flush()
        written = disk(store)
        clock.advance(2_000)
        assert len(drain(store)) == 20_000
        store.space_short = True
        store.flush()
        assert store.commit_log.log.bytes_on_disk() <= 8 * KIB
        # The timer log keeps the id-index run holding the live start (up to 65,536
        # entries of 20 bytes): the index reads whole runs.
        assert disk(store) <= 20_000 * 20 + FIXED + 2 * CHUNK < written // 5


def test_a_file_system_without_holes_rolls_an_emptied_active_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_holes(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(file_space, "punch_hole", no_holes)
    monkeypatch.setattr("delaybridge.timerlog.segments.punch_hole", no_holes)
    clock = ManualClock(START_MS)
    directory = tmp_path / "s"
    store = TimerStore.open(directory, DEFAULTS, clock)
    store.append([big(i, START_MS + 1_000 + i) for i in range(50)])
    store.flush()
    clock.advance(2_000)
    drain(store)
    store.space_short = True
    store.flush()
    assert store.stats().commit_segments == 0  # deleted: nothing in it was live
    assert disk(store) <= 2 * MIB  # the timer segment's entries stay until the next one
    store.append([big(100, START_MS + 5_000)])  # a new segment where the log ended
    store.flush()
    store.abandon()
    clock.advance(5_000)
    again = TimerStore.open(directory, DEFAULTS, clock)
    assert [r.id for r in drain(again)] == ["m100"]
    again.flush(recompute_live=True)
    assert again.stats().timer_segments == 1  # the sealed one went once passed
    again.close()


def test_without_its_checkpoint_a_punched_store_is_rescued_whole(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    directory = tmp_path / "s"
    store = TimerStore.open(directory, DEFAULTS, clock)
    store.append([big(i, START_MS + 1_000 + i) for i in range(30)])  # the dead prefix
    store.append([big(i, START_MS + 200_000 - 1_000 * i) for i in range(30, 60)])
    store.flush()
    clock.advance(200_000 - 45 * 1_000)
    assert len(drain(store)) == 30 + 15
    store.space_short = True
    store.flush()
    store.close()
    os.unlink(directory / "checkpoint")
    again = TimerStore.open(directory, DEFAULTS, clock)
    assert again.rescued
    clock.advance(100_000)
    left = drain(again)
    # Nothing pending is lost, nothing punched comes back (damaged or not): the rescue
    # may deliver again only whole records it could not tell were delivered.
    assert {f"m{i}" for i in range(30, 45)} <= {r.id for r in left}
    assert all(r.value == bytes([int(r.id[1:]) % 251]) * BIG for r in left)
    assert again.stats().corrupt_records_total == 0
    again.close()


SMALL_WHEEL = StoreSettings(
    tick_ms=100, wheel_slots=64, commit_segment_bytes=256 * KIB, timer_segment_entries=64
)
RECORD = 64 * KIB


@settings(max_examples=60 if DEEP else 25, deadline=None)
@given(
    batches=st.lists(st.lists(st.integers(0, 6_000), min_size=1, max_size=6), min_size=1),
    cut_ms=st.integers(0, 6_000),
    then=st.sampled_from(["crash", "rescue", "close"]),
)
def test_what_is_given_back_is_finished_and_what_is_pending_stays_whole(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[int]], cut_ms: int, then: str
) -> None:
    """Against a model: after a flush that gives space back, the commit log holds little
    more than the records not finished, and every pending record comes out whole --
    after a crash, a clean close, or a rescue without the checkpoint."""
    directory = tmp_path_factory.mktemp("reclaim")
    clock = ManualClock(START_MS)
    store = TimerStore.open(directory, SMALL_WHEEL, clock)
    due: dict[str, int] = {}
    n = 0
    for batch in batches:
        records = []
        for delay in batch:
            n += 1
            due[f"m{n}"] = START_MS + delay
            records.append(
                rec(f"m{n}", START_MS + delay, offset=n, value=bytes([n % 251]) * RECORD)
            )
        store.append(records)
    store.flush()
    clock.advance(cut_ms)
    delivered = {r.id for r in drain(store)}
    store.space_short = True
    store.flush()
    cursor_tick = store.delivered_through_ms
    # Every append came before anything was read: a due time at or before the read tick
    # (START_MS) went to the tick after it.
    ticks = [max(-(-d // 100) * 100, START_MS + 100) for d in due.values()]
    unfinished = sum(1 for t in ticks if t >= cursor_tick)
    block = store.commit_log.log.block()
    held = store.commit_log.log.bytes_on_disk()
    assert held <= unfinished * RECORD + n * 2 * block + 2 * block
    if then == "close":
        store.close()
    else:
        store.abandon()
        if then == "rescue":
            os.unlink(directory / "checkpoint")
    clock.advance(10_000)
    again = TimerStore.open(directory, SMALL_WHEEL, clock)
    left = drain(again)
    pending = set(due) - delivered
    got = {r.id for r in left}
    assert pending <= got and (then == "rescue" or got == pending)
    assert all(r.value == bytes([int(r.id[1:]) % 251]) * RECORD for r in left)
    assert again.stats().corrupt_records_total == 0
    again.close()


class Killed(BaseException):
    """kill -9 at a chosen point of a reclaim (not an error anything catches)."""


def build_for_reclaim(directory: Path, clock: ManualClock) -> tuple[TimerStore, set[str]]:
    """A store whose next flush gives back a prefix and the inside of finished records;
    returns it and the ids still pending."""
    store = TimerStore.open(directory, DEFAULTS, clock)
    store.append([big(i, START_MS + 1_000 + i) for i in range(10)])
    store.append([big(i, START_MS + 50_000 - 1_000 * i) for i in range(10, 30)])
    store.flush()
    clock.advance(50_000 - 20 * 1_000)
    delivered = {r.id for r in drain(store)}
    return store, {f"m{i}" for i in range(30)} - delivered


def test_a_crash_at_any_point_of_a_reclaim_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from delaybridge.timerlog import segments

    real = file_space.punch_hole
    calls = {"n": 0, "kill_at": 0}

    def punch(fd: int, offset: int, length: int) -> None:
        calls["n"] += 1
        if calls["n"] == calls["kill_at"]:
            raise Killed
        real(fd, offset, length)

    monkeypatch.setattr(segments, "punch_hole", punch)
    probe, pending = build_for_reclaim(tmp_path / "probe", ManualClock(START_MS))
    probe.space_short = True
    probe.flush()
    total = calls["n"]
    assert total >= 5  # prefixes and records: every one of them is a place to die
    probe.close()
    for kill_at in range(1, total + 1):
        calls["n"], calls["kill_at"] = 0, kill_at
        clock = ManualClock(START_MS)
        directory = tmp_path / f"k{kill_at}"
        store, pending = build_for_reclaim(directory, clock)
        store.space_short = True
        with pytest.raises(Killed):
            store.flush()
        store.abandon()
        clock.advance(100_000)
        again = TimerStore.open(directory, DEFAULTS, clock, verify_commit_log=True)
        left = drain(again)
        assert {r.id for r in left} == pending, kill_at
        assert all(r.value == bytes([int(r.id[1:]) % 251]) * BIG for r in left)
        assert again.stats().corrupt_records_total == 0
        again.close()


def test_a_look_up_after_a_restart_never_reads_a_tick_read_to_its_end(tmp_path: Path) -> None:
    """A tick read to its end is not part of the live range, so its list may start in a
    prefix already given back; after a restart, asking whether one of its later entries
    is pending used to read that list from its start (a punched entry: IntegrityError,
    or SIGBUS on a full tmpfs)."""
    settings = StoreSettings(index_run_entries=16)
    clock = ManualClock(START_MS)
    directory = tmp_path / "s"
    a, a2, t, b = (START_MS + ms for ms in (1_000, 1_500, 2_000, 60_000))
    store = TimerStore.open(directory, settings, clock)
    store.append([rec(f"a{i}", a, offset=i) for i in range(300)])
    store.append([rec("early-x", t, offset=300)])  # entry 300, in a block given back below
    store.append([rec(f"a2-{i}", a2, offset=301 + i) for i in range(600)])
    store.append([rec(f"b{i}", b, offset=901 + i) for i in range(10)])  # the live start
    store.append([rec("late-x", t, offset=911)])  # entry 911: same tick as early-x
    clock.advance(2_000)
    assert len(drain(store)) == 902
    store.flush(recompute_live=True)
    assert store.timer.log.segments[0].punched > 4096  # early-x's entry is punched out
    store.close()
    again = TimerStore.open(directory, settings, clock)
    assert again.lookup("late-x") is None  # delivered: not pending, and nothing raised
    assert again.cancel([("late-x", None)]) == [False]
    assert [r.id for r in again.pending_with_ids({"b3", "late-x"})["b3"]] == ["b3"]
    again.close()


def test_a_refused_append_gives_back_the_bytes_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills in the middle of an append's write keeps the half it took; the
    append is refused whole, and now its blocks go back at once (a volume filled by
    refused halves would leave no room for the checkpoint that gives space back)."""
    clock = ManualClock(START_MS)
    with TimerStore.open(tmp_path / "s", DEFAULTS, clock) as store:
        store.append([big(0, START_MS + 1_000)])
        store.flush()
        before = store.commit_log.log.bytes_on_disk()
        with FaultyDisk(1).installed(monkeypatch), pytest.raises(OSError):
            store.append([big(i, START_MS + 1_000) for i in range(1, 20)])  # half written
        assert store.commit_log.log.bytes_on_disk() == before
        store.append([big(1, START_MS + 1_000)])
        clock.advance(2_000)
        assert [r.id for r in drain(store)] == ["m0", "m1"]


def test_a_flush_with_no_room_left_uses_the_reserve_and_takes_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a volume filled to its last block the checkpoint cannot be written, and
    without it nothing is given back: the store's reserve makes the room for it."""
    from delaybridge.timerlog import checkpoint

    clock = ManualClock(START_MS)
    directory = tmp_path / "s"
    real = durable.write_atomic

    def full_while_the_reserve_is_held(path: Path, data: bytes | str) -> None:
        if (directory / "reserve").exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    with TimerStore.open(directory, DEFAULTS, clock) as store:
        assert (directory / "reserve").stat().st_blocks * 512 == RESERVE_BYTES
        store.append([big(i, START_MS + 1_000) for i in range(10)])
        store.flush()
        clock.advance(2_000)
        drain(store)
        with monkeypatch.context() as m:
            m.setattr(checkpoint, "write_atomic", full_while_the_reserve_is_held)
            store.space_short = True
            store.flush()  # no room: the reserve goes, the checkpoint is written...
        assert store.commit_log.log.bytes_on_disk() <= 8 * KIB  # ...and space came back
        assert (directory / "reserve").stat().st_blocks * 512 == RESERVE_BYTES  # taken back
        store.append([big(20, START_MS + 3_000)])
        with monkeypatch.context() as m:
            m.setattr(checkpoint, "write_atomic", _always_full)
            with pytest.raises(OSError):  # the reserve was not enough: the flush fails
                store.flush()
            assert not (directory / "reserve").exists()
            with pytest.raises(OSError):  # and the next has no reserve left to use
                store.flush()
        store.flush()  # room again: the reserve is taken back
        assert (directory / "reserve").stat().st_blocks * 512 == RESERVE_BYTES


def _always_full(path: Path, data: bytes | str) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")
