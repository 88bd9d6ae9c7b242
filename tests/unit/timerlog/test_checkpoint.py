"""The checkpoint (``checkpoint``): its JSON names, versions, round trip and damage.

Byte-for-byte agreement with what 505b445 wrote: ``test_golden_formats.py``.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import orjson
import pytest

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import StoreMarks
from delaybridge.timerlog.checkpoint import ENVELOPE, MAGIC, Checkpoint
from delaybridge.timerlog.stats import StoreCounters

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
