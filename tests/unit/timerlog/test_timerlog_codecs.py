"""Round trips and damage detection of each on-disk format."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import orjson
import pytest

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import StoreMarks, cancel_codec, timer_codec
from delaybridge.timerlog.checkpoint import ENVELOPE, MAGIC, Checkpoint
from delaybridge.timerlog.stats import StoreCounters

# Once per implementation of the hot path: pure Python, and compiled where built
# (tests/unit/hot_impl.py).
pytestmark = pytest.mark.usefixtures("hot_impl")

P = Path("f")


def test_timer_entries_pack_type_and_position_and_check_crc() -> None:
    e = timer_codec.build(
        np.array([7, 8], np.uint32),
        np.array([-1, 0], np.int64),
        np.array([100, 200], np.int64),
        np.array([0, 2**50], np.int64),
        np.array([1, 2], np.uint64),
    )
    assert timer_codec.kinds_of(e).tolist() == [1, 2]
    assert timer_codec.positions_of(e).tolist() == [0, 2**50]
    raw = e.tobytes()
    assert zlib.crc32(raw[4:32]) == int(e["crc"][0])  # plain zlib can check an entry
    assert len(timer_codec.bad_rows(e)) == 0
    damaged = bytearray(raw)
    damaged[40] ^= 0x10
    bad = np.frombuffer(bytes(damaged), dtype=timer_codec.DTYPE)
    assert timer_codec.bad_rows(bad).tolist() == [1]


def test_one_timer_entry_decodes_by_name_and_names_the_damage() -> None:
    raw = timer_codec.build(
        np.array([7, 8], np.uint32),
        np.array([-1, 0], np.int64),
        np.array([100, 200], np.int64),
        np.array([0, 2**50], np.int64),
        np.array([1, 3], np.uint64),
    ).tobytes()
    entry = timer_codec.decode_one(raw, 32, P, 41)
    assert entry == timer_codec.TimerEntry(
        id_hash=8, prev=0, slot_ms=200, cl_pos=2**50, kind=timer_codec.EntryType.ROLLED
    )
    damaged = bytearray(raw)
    damaged[40] ^= 0x10
    with pytest.raises(IntegrityError, match=r"^f: offset 32: timer-log entry 41 CRC mismatch"):
        timer_codec.decode_one(bytes(damaged), 32, P, 41)
    one = np.array([0], np.int64)
    unknown = timer_codec.build(  # a valid CRC over a type no writer uses
        np.array([1], np.uint32), one, one, one, np.array([9], np.uint64)
    ).tobytes()
    with pytest.raises(IntegrityError, match=r"^f: offset 0: timer-log entry 0 has type 9,"):
        timer_codec.decode_one(unknown, 0, P, 0)


@pytest.mark.parametrize(
    "item",
    [
        cancel_codec.Applied(5, 1_000),
        cancel_codec.Waiting(9, "id-1", None),
        cancel_codec.Waiting(9, "id-2", "orders"),
        cancel_codec.Waiting(9, "id-3", "orders", 7, 3, matched=True, replace=True),
        cancel_codec.Resolved(64),
    ],
)
def test_cancel_records_round_trip_and_detect_damage(item: cancel_codec.Decoded) -> None:
    raw = cancel_codec.encode(item)
    assert cancel_codec.decode(raw, 0, P, 0) == (item, len(raw))
    for i in range(len(raw)):
        damaged = bytearray(raw)
        damaged[i] ^= 0x01
        with pytest.raises(IntegrityError):
            cancel_codec.decode(bytes(damaged), 0, P, 0)


# The checkpoint body as every release so far wrote it: its names must keep loading.
CHECKPOINT_V1_FIELDS = {
    "tick_ms",
    "wheel_slots",
    "commit_end",
    "timer_end",
    "live_start",
    "done_tick_ms",
    "done_index",
    "cancel_generation",
    "cancel_end",
    "last_source_offset",
    "appended_total",
    "delivered_total",
    "cancelled_total",
    "unknown_cancels_total",
    "rolled_total",
    "removed_total",
    "pending_by_topic",
    "marks",
}
CHECKPOINT_FIELDS = CHECKPOINT_V1_FIELDS | {
    "corrupt_records_total",
    "unreadable_records_total",
    "replaced_total",
}


def test_checkpoint_json_keeps_its_flat_field_names(tmp_path: Path) -> None:
    counters = StoreCounters(appended_total=5, delivered_total=2, cancelled_total=1)
    Checkpoint(100, 64, timer_end=5, counters=counters).save(tmp_path)
    body = orjson.loads((tmp_path / "checkpoint").read_bytes()[16:])
    assert set(body) == CHECKPOINT_FIELDS
    assert (body["appended_total"], body["delivered_total"], body["rolled_total"]) == (5, 2, 0)
    older = {k: v for k, v in body.items() if k != "rolled_total"}  # a counter added later
    loaded = Checkpoint.from_json(older)
    assert loaded.counters == StoreCounters(5, 2, 1, 0, 0, 0) and loaded.timer_end == 5
    assert loaded.marks == StoreMarks()


def test_a_version_1_checkpoint_loads_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    ck = Checkpoint(100, 64, commit_end=10, timer_end=2)
    body = {k: v for k, v in ck.to_json().items() if k in CHECKPOINT_V1_FIELDS}
    raw = orjson.dumps(body)
    path = tmp_path / "checkpoint"
    path.write_bytes(ENVELOPE.pack(MAGIC, 1, 0, len(raw), zlib.crc32(raw)) + raw)
    assert Checkpoint.load(tmp_path) == ck
    path.write_bytes(ENVELOPE.pack(MAGIC, 3, 0, len(raw), zlib.crc32(raw)) + raw)
    with pytest.raises(IntegrityError, match="checkpoint: offset 0: not a checkpoint of "):
        Checkpoint.load(tmp_path)


def test_checkpoint_round_trip_and_damage(tmp_path: Path) -> None:
    ck = Checkpoint(100, 64, commit_end=10, timer_end=2, pending_by_topic={"a": 2})
    ck.save(tmp_path)
    assert Checkpoint.load(tmp_path) == ck
    raw = bytearray((tmp_path / "checkpoint").read_bytes())
    raw[-2] ^= 1
    (tmp_path / "checkpoint").write_bytes(bytes(raw))
    with pytest.raises(IntegrityError, match="checkpoint CRC"):
        Checkpoint.load(tmp_path)
