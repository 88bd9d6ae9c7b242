"""Damaged store files that are only indexes or summaries are repaired at open.

Before issue 10 a truncated or zeroed wheel refused to open (though deleting it rebuilt
it fine), zeroed slots behind an intact header silently lost their messages, and a
missing checkpoint made the store delete every segment it had.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delaybridge.errors import ConfigError, IntegrityError
from delaybridge.fileformat import HEADER_SIZE
from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from tests.unit.timerlog.support import START_MS, drain, rec

IDS = [f"m{i}" for i in range(40)]


def build(directory: Path, settings: StoreSettings, clock: ManualClock) -> None:
    """A cleanly closed store: 40 messages over 4 s, 21 of them delivered."""
    with TimerStore.open(directory, settings, clock) as store:
        store.append([rec(id, START_MS + 100 * i, offset=i) for i, id in enumerate(IDS)])
        clock.advance(2_000)
        assert len(drain(store)) == 21


def rest(directory: Path, settings: StoreSettings, clock: ManualClock) -> list[str]:
    with TimerStore.open(directory, settings, clock) as store:
        clock.advance(5_000)
        return [r.id for r in drain(store)]


@pytest.mark.parametrize("how", ["truncated", "zeroed", "empty", "missing"])
def test_a_damaged_wheel_file_is_made_again_and_rebuilt(
    tmp_path: Path, small: StoreSettings, clock: ManualClock, how: str
) -> None:
    build(tmp_path, small, clock)
    wheel = tmp_path / "wheel"
    size = wheel.stat().st_size
    if how == "truncated":
        os.truncate(wheel, size // 2)
    elif how == "zeroed":
        wheel.write_bytes(bytes(size))
    elif how == "empty":
        wheel.write_bytes(b"")
    else:
        wheel.unlink()
    assert rest(tmp_path, small, clock) == IDS[21:]


def test_zeroed_slots_behind_a_clean_header_are_noticed_and_rebuilt(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    build(tmp_path, small, clock)
    wheel = tmp_path / "wheel"
    raw = wheel.read_bytes()
    wheel.write_bytes(raw[:HEADER_SIZE] + bytes(len(raw) - HEADER_SIZE))  # stamp says clean
    assert rest(tmp_path, small, clock) == IDS[21:]


def test_a_wheel_of_other_geometry_is_still_a_setting_error(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    build(tmp_path, small, clock)
    (tmp_path / "checkpoint").unlink()  # only the wheel's header can tell now
    other = StoreSettings(**{**small.__dict__, "wheel_slots": 128})
    with pytest.raises(ConfigError, match="wheel_slots=128"):
        TimerStore.open(tmp_path, other, clock)


def segment_files(directory: Path) -> list[Path]:
    return sorted([*directory.glob("commitlog/*.clog"), *directory.glob("timerlog/*.tlog")])


@pytest.mark.parametrize("how", ["missing", "damaged"])
def test_a_lost_checkpoint_is_worked_out_from_the_segments_which_are_kept(
    tmp_path: Path, small: StoreSettings, clock: ManualClock, how: str
) -> None:
    build(tmp_path, small, clock)
    with TimerStore.open(tmp_path, small, clock) as store:
        assert store.cancel([("m30", None)]) == [True]
        store.append([rec("late", clock.now_ms() + 9_000, offset=99)])  # rolled later
    files = segment_files(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    if how == "missing":
        checkpoint.unlink()
    else:
        checkpoint.write_bytes(checkpoint.read_bytes()[:-3])
    with TimerStore.open(tmp_path, small, clock) as store:
        assert store.rescued and set(files) <= set(segment_files(tmp_path))
        assert store.last_source_offset == 99  # what ingest must not take again
        assert store.stats().pending >= 19  # the 18 left and "late" (and some delivered)
        clock.advance(20_000)
        got = [r.id for r in drain(store)]
    # At least once: everything pending goes, earlier deliveries may repeat; the cancel
    # holds (its entry is still ahead of the rescued cursor).
    assert set(IDS[21:]) - {"m30"} | {"late"} <= set(got)
    assert "m30" not in got
    assert (tmp_path / "checkpoint.damaged").exists() == (how == "damaged")
    with TimerStore.open(tmp_path, small, clock) as store:  # and it has a checkpoint again
        assert not store.rescued and drain(store) == []


def test_without_a_checkpoint_damage_inside_the_timer_log_is_refused_not_deleted(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    build(tmp_path, small, clock)
    (tmp_path / "checkpoint").unlink()
    (segment,) = tmp_path.glob("timerlog/*.tlog")
    raw = bytearray(segment.read_bytes())
    raw[HEADER_SIZE + 5 * 20 + 9] ^= 1  # entry 5 of 40 (20-byte entries)
    segment.write_bytes(bytes(raw))
    files = segment_files(tmp_path)
    with pytest.raises(IntegrityError, match=r"\.tlog: offset 164: timer-log entry 5 is damaged"):
        TimerStore.open(tmp_path, small, clock)
    assert segment_files(tmp_path) == files


def test_a_new_store_and_a_store_never_flushed(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    with TimerStore.open(tmp_path / "new", small, clock) as store:
        assert not store.rescued and store.stats().pending == 0
    store = TimerStore.open(tmp_path / "crashed", small, clock)
    store.append([rec("a", START_MS + 100, offset=0), rec("b", START_MS + 100, offset=1)])
    store.abandon()  # before its first flush: no checkpoint at all
    with TimerStore.open(tmp_path / "crashed", small, clock) as store:
        clock.advance(200)
        assert [r.id for r in drain(store)] == ["a", "b"]


def test_a_rescue_starts_at_the_first_entry_whose_record_is_still_there(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    # Small commit segments, one timer segment: delivered records' commit segments are
    # deleted while the timer segment still holds their entries.
    with TimerStore.open(tmp_path, small, clock) as store:
        for batch in range(7):  # 56 entries: one timer segment (64), two commit ones
            ids = [f"b{batch}-{i}" for i in range(8)]
            store.append(
                [rec(id, clock.now_ms() + 100, offset=batch * 8 + i) for i, id in enumerate(ids)]
            )
            clock.advance(200)
            drain(store)
            store.flush(recompute_live=True)
        store.append([rec("left", clock.now_ms() + 1_000, offset=99)])
        first_commit = store.commit_log.log.start
        assert first_commit > 0 and store.timer.start == 0  # the case this is about
    (tmp_path / "checkpoint").unlink()
    with TimerStore.open(tmp_path, small, clock) as store:
        assert store.rescued
        clock.advance(2_000)
        assert "left" in {r.id for r in drain(store)}


steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.integers(-2_000, 12_000), min_size=1, max_size=6)),
        st.tuples(st.just("advance"), st.sampled_from([50, 100, 700, 3_000])),
        st.tuples(st.just("cancel"), st.integers(0, 1_000)),
        st.tuples(st.just("flush"), st.just(0)),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=steps, crash=st.booleans())
def test_a_rescue_loses_nothing_pending_and_keeps_pending_cancels(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, object]], crash: bool
) -> None:
    settings_ = StoreSettings(
        tick_ms=100, wheel_slots=32, commit_segment_bytes=4096, timer_segment_entries=64
    )
    directory = tmp_path_factory.mktemp("rescue")
    clock = ManualClock(START_MS)
    store = TimerStore.open(directory, settings_, clock)
    pending: dict[str, int] = {}  # id -> due, of what is not delivered or cancelled
    due_of: dict[str, int] = {}
    cancelled: set[str] = set()
    n = 0
    for kind, arg in steps:
        if kind == "append":
            batch = []
            for delay in arg:  # type: ignore[attr-defined]
                n += 1
                batch.append(rec(f"m{n}", clock.now_ms() + delay, offset=n))
                pending[f"m{n}"] = due_of[f"m{n}"] = clock.now_ms() + delay
            store.append(batch)
        elif kind == "advance":
            clock.advance(arg)  # type: ignore[arg-type]
            for r in drain(store):
                pending.pop(r.id, None)
        elif kind == "cancel" and pending:
            id = sorted(pending)[arg % len(pending)]  # type: ignore[operator]
            if store.cancel([(id, None)]) == [True]:
                cancelled.add(id)
                del pending[id]
        else:
            store.flush()
    store.flush()
    store.abandon() if crash else store.close()
    (directory / "checkpoint").unlink()
    not_yet_due = {i for i in cancelled if due_of[i] > clock.now_ms()}
    with TimerStore.open(directory, settings_, clock) as again:
        assert again.rescued or n == 0
        clock.advance(60_000)
        got = {r.id for r in drain(again)}
    assert set(pending) <= got, set(pending) - got  # at least once
    assert not not_yet_due & got  # a cancel of a message still ahead holds
