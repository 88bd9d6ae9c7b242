"""A damaged commit-log record is quarantined; the rest of the store goes on delivering.

Before issue 10 the store opened fine over a flipped bit and then raised IntegrityError
from ``take_due`` at the first delivery read: the sidecar died with every healthy
partition, and a restart met the same record again.
"""

from __future__ import annotations

from pathlib import Path

from delaybridge.timerlog import (
    DamagedRecord,
    ManualClock,
    StoreSettings,
    TimerRecord,
    TimerStore,
    commit_codec,
)
from delaybridge.timerlog.quarantine import QUARANTINE_HEADER, salvage
from tests.unit.timerlog.support import START_MS, drain, rec

ORDER = [f"m{i}" for i in range(6)]


def build(directory: Path, settings: StoreSettings, clock: ManualClock) -> None:
    with TimerStore.open(directory, settings, clock) as store:
        store.append(
            [
                rec(id, START_MS + 1_000, offset=10 + i, headers=(("h", b"1"),))
                for i, id in enumerate(ORDER)
            ]
        )
        store.append([rec("far", START_MS + 9_000, offset=20)])  # beyond the window: rolled


def record_span(directory: Path, settings: StoreSettings, id: str) -> tuple[Path, int, int]:
    """(segment file, file offset, length) of the stored record of ``id``."""
    store = TimerStore.open(directory, settings, ManualClock(START_MS))
    try:
        for index in range(store.timer.start, store.timer.end):
            pos = store.timer.entry(index).cl_pos
            if store.commit_log.read(pos).id == id:
                seg, off = store.commit_log.log.locate(pos)
                return seg.path, off, len(store.commit_log.raw(pos))
        raise AssertionError(f"{id} not stored")
    finally:
        store.abandon()


def damage(path: Path, offset: int, data: bytes | None = None) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        old = f.read(1 if data is None else len(data))
        f.seek(offset)
        f.write(bytes([old[0] ^ 0x10]) if data is None else data)


def test_a_flipped_bit_quarantines_the_record_with_what_is_readable(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    build(tmp_path, small, clock)
    path, off, length = record_span(tmp_path, small, "m2")
    damage(path, off + length - 3)  # in the value or the headers
    with TimerStore.open(tmp_path, small, clock) as store:
        clock.advance(1_000)
        got = drain(store)
        assert [r.id for r in got] == ORDER  # the others delivered, in order
        bad = got[2]
        assert isinstance(bad, DamagedRecord)
        assert (bad.target_topic, bad.source_offset, bad.key, bad.value) == (
            "orders",
            12,
            b"k",
            None,
        )
        assert bad.due_ms <= clock.now_ms()
        name, note = bad.headers[-1]
        assert name == QUARANTINE_HEADER
        assert f"{path}: offset {off}: record CRC mismatch" in (note or b"").decode()
        assert not any(isinstance(r, DamagedRecord) for i, r in enumerate(got) if i != 2)
        stats = store.stats()
        assert (stats.corrupt_records_total, stats.unreadable_records_total) == (1, 0)
        assert stats.pending == 1  # "far"


def test_a_zeroed_record_is_skipped_and_counted(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    build(tmp_path, small, clock)
    path, off, length = record_span(tmp_path, small, "m3")
    damage(path, off, bytes(length))  # a zeroed page: nothing says what it was
    with TimerStore.open(tmp_path, small, clock) as store:
        clock.advance(1_000)
        assert [r.id for r in drain(store)] == [i for i in ORDER if i != "m3"]
        stats = store.stats()
        assert (stats.corrupt_records_total, stats.unreadable_records_total) == (1, 1)
        store.flush()
    with TimerStore.open(tmp_path, small, clock) as store:  # counted, and done with
        assert store.stats().unreadable_records_total == 1
        assert drain(store) == []


def test_damage_met_at_open_and_at_a_roll_is_quarantined_too(
    tmp_path: Path, small: StoreSettings, clock: ManualClock
) -> None:
    id = "far"  # the last record (recovery checks it) and beyond the window (rolled)
    build(tmp_path, small, clock)
    path, off, length = record_span(tmp_path, small, id)
    damage(path, off + length - 1)
    with TimerStore.open(tmp_path, small, clock) as store:  # opens
        assert store.cancel([(id, None)]) == [False]  # cannot match what it cannot read
        assert store.lookup(id) is None
        clock.advance(10_000)
        got = {r.id: r for r in drain(store)}
        assert set(got) == {*ORDER, "far"}
        assert isinstance(got[id], DamagedRecord)
        assert store.stats().corrupt_records_total == 1


def test_a_damaged_compact_record_is_salvaged_with_its_identity() -> None:
    base = TimerRecord("id-1", START_MS + 5_000, "orders", 3, b"k", b"v", (), 7, START_MS)
    record = base._replace(headers=(("trace", b"t-1"), ("empty", None)), value=b"payload")
    raw = bytearray(b"".join(commit_codec.encode_batch([record]).parts))
    raw[-1] ^= 0xFF  # the value's last byte: the CRC fails, the fields still parse
    got = salvage(bytes(raw), 0, len(raw), Path("f"), 100, "record CRC mismatch")
    assert got is not None
    assert (got.id, got.target_topic, got.key, got.value) == ("id-1", "orders", b"k", None)
    assert (got.source_offset, got.source_timestamp_ms) == (7, START_MS)
    assert got.headers[:2] == record.headers
    assert got.headers[2][0] == "delaybridge-store-corrupt"
    assert (got.headers[2][1] or b"").endswith(b"value dropped")  # length not recorded
