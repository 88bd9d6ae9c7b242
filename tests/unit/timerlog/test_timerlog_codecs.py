"""Round trips and damage detection of each on-disk format."""

from __future__ import annotations

import zlib
from pathlib import Path

import orjson
import pytest

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import StoreMarks, cancel_codec
from delaybridge.timerlog.checkpoint import ENVELOPE, MAGIC, Checkpoint
from delaybridge.timerlog.stats import StoreCounters

# Once per implementation of the hot path: pure Python, and compiled where built
# (tests/unit/hot_impl.py).
pytestmark = pytest.mark.usefixtures("hot_impl")

P = Path("f")


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
