"""Every store format byte for byte as commit 505b445 wrote it (golden files).

``golden/`` holds the bytes 505b445's code made of the inputs in ``golden/inputs.py``
(its ``README.md`` says how). Each test encodes the same inputs with today's code and
compares the bytes, then decodes the golden bytes and compares the values: a change to
any layout, field order, flag or CRC range fails here, whichever side it breaks.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind
from delaybridge.timerlog import (
    cancel_record,
    changelog_record,
    commit_codec,
    commit_record,
    timer_entry,
)
from delaybridge.timerlog.cancel_record import (
    CancelledEntry,
    CancelRecord,
    Matched,
    Resolved,
    WaitingCancel,
)
from delaybridge.timerlog.checkpoint import Checkpoint
from delaybridge.timerlog.marks import StoreMarks
from delaybridge.timerlog.records import Cancel
from delaybridge.timerlog.stats import StoreCounters
from delaybridge.wheel.slot_codec import CRC, DTYPE, SLOT, SLOT_SIZE
from tests.unit.timerlog.golden import inputs

# Once per implementation of the hot path: pure Python, and compiled where built
# (tests/unit/hot_impl.py).
pytestmark = pytest.mark.usefixtures("hot_impl")

GOLDEN = Path(__file__).parent / "golden"
P = Path("golden")


def golden(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def split_records(raw: bytes) -> list[bytes]:
    """Length-prefixed records, back to back (commit-log and cancel-log records)."""
    out, off = [], 0
    while off < len(raw):
        length = int.from_bytes(raw[off : off + 4], "little")
        out.append(raw[off : off + length])
        off += length
    return out


@pytest.mark.parametrize(
    ("name", "compact"), [("commit_records.bin", True), ("commit_records_wide.bin", False)]
)
def test_commit_records(name: str, compact: bool) -> None:
    raw = golden(name)
    assert b"".join(commit_codec.encode_batch(inputs.RECORDS, compact).records()) == raw
    records = split_records(raw)
    kinds = [r[8] for r in records]
    assert kinds == ([2, 2, 2, 2, 1, 1, 1] if compact else [1] * 7)
    offsets = np.cumsum([0] + [len(r) for r in records[:-1]]).tolist()
    decoded = commit_codec.decode_many([raw], [P], [0] * len(offsets), offsets)
    assert decoded == inputs.RECORDS
    for rec, off, size in zip(inputs.RECORDS, offsets, map(len, records), strict=True):
        assert commit_record.check(raw, off, len(raw), P, off) == size
        assert commit_record.due_of(raw, off) == rec.due_ms
        assert commit_record.source_offset_of(raw, off) == rec.source_offset


Columns = tuple[
    npt.NDArray[np.uint32],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.uint64],
]


def _columns(rows: Sequence[tuple[int, int, int, int, int]]) -> Columns:
    """Entries as the codecs' columns: id_hash, prev, slot_ms, position, type."""
    hashes, prev, slots, positions, kinds = zip(*rows, strict=True)
    return (
        np.array(hashes, np.uint32),
        np.array(prev, np.int64),
        np.array(slots, np.int64),
        np.array(positions, np.int64),
        np.array(kinds, np.uint64),
    )


def test_timer_entries_version_1() -> None:
    raw = golden("timer_entries_v1.bin")
    assert timer_entry.build(*_columns(inputs.TIMER_ENTRIES)).tobytes() == raw
    for n, (h, prev, slot, cl, kind) in enumerate(inputs.TIMER_ENTRIES):
        entry = timer_entry.decode_wide_one(raw, n * 32, P, n)
        assert entry == (h, prev, slot, cl, kind)


def test_timer_entries_version_2() -> None:
    raw = golden("timer_entries_v2.bin")
    bases = timer_entry.Bases(*inputs.TIMER_BASES)
    first = inputs.TIMER_FIRST_INDEX
    stored = timer_entry.encode(*_columns(inputs.TIMER_ENTRIES_V2), first, bases)
    assert stored.tobytes() == raw
    for n, entry in enumerate(inputs.TIMER_ENTRIES_V2):
        assert timer_entry.encode_one(*entry, first + n, bases) == raw[n * 20 : n * 20 + 20]
        assert timer_entry.decode_one(raw, n * 20, P, first + n, bases) == entry
    table = np.frombuffer(raw, dtype=timer_entry.COMPACT_DTYPE)
    indexes = np.arange(first, first + len(table), dtype=np.int64)
    wide = timer_entry.decode(table, indexes, bases)
    assert wide["prev"].tolist() == [e[1] for e in inputs.TIMER_ENTRIES_V2]
    assert timer_entry.positions_of(wide).tolist() == [e[3] for e in inputs.TIMER_ENTRIES_V2]


def _cancel_records() -> list[CancelRecord]:
    records: list[CancelRecord] = [CancelledEntry(*inputs.CANCEL_APPLIED)]
    for expires, rid, topic, sent, offset, matched, replace in inputs.CANCEL_WAITS:
        cancel = Cancel(rid, topic, sent, offset, replace)
        records.append(WaitingCancel(cancel, expires, matched))
    records.append(Resolved(inputs.CANCEL_RESOLVED))
    records.append(Matched(inputs.CANCEL_MATCHED))
    return records


def test_cancel_records() -> None:
    raw = golden("cancel_records.bin")
    records = _cancel_records()
    assert b"".join(cancel_record.encode(r) for r in records) == raw
    off = 0
    for record in records:
        got, length = cancel_record.decode(raw, off, P, off)
        assert got == record
        off += length
    assert off == len(raw)


def test_changelog_records() -> None:
    keys = golden("changelog_keys.bin")
    assert b"".join(changelog_record.key_of(o, g) for o, g in inputs.CHANGELOG_KEYS) == keys
    off = 0
    for offset, generation in inputs.CHANGELOG_KEYS:
        size = 16 if generation >> 32 else 12
        assert changelog_record.parse_key(keys[off : off + size], "c") == (offset, generation)
        off += size
    assert off == len(keys)
    values = golden("changelog_values.bin")
    carried = [inputs.RECORDS[n] for n in inputs.CHANGELOG_VALUES]
    encoded = commit_codec.encode_batch(carried).records()
    assert b"".join(changelog_record.value_of(r) for r in encoded) == values
    off = 0
    for rec, enc in zip(carried, encoded, strict=True):
        value = values[off : off + 1 + len(enc)]
        inner = bytes(changelog_record.record_of(value, "c"))
        assert commit_codec.decode(inner, 0, P) == rec
        off += len(value)
    assert off == len(values)
    progress = golden("changelog_progress.bin")
    key, tick = progress[:8], progress[8:]
    assert key == changelog_record.PROGRESS_KEY
    assert changelog_record.PROGRESS.pack(inputs.PROGRESS_TICK_MS) == tick
    assert changelog_record.PROGRESS.unpack(tick) == (inputs.PROGRESS_TICK_MS,)
    assert changelog_record.ID_HEADER == "delay-id"  # a tombstone's only header


def test_checkpoint(tmp_path: Path) -> None:
    raw = golden("checkpoint.bin")
    counters = StoreCounters(**inputs.CHECKPOINT_COUNTERS)
    fields = {**inputs.CHECKPOINT, "marks": StoreMarks.from_json(inputs.CHECKPOINT_MARKS)}
    ck = Checkpoint(**fields, counters=counters)  # type: ignore[arg-type]
    ck.save(tmp_path)
    assert (tmp_path / "checkpoint").read_bytes() == raw
    (tmp_path / "checkpoint").write_bytes(raw)
    assert Checkpoint.load(tmp_path) == ck
    assert b'"marks":{"source_resume":7,"changelog":41}' in raw


def test_wheel_slots() -> None:
    raw = golden("wheel_slots.bin")
    slots = np.empty(len(inputs.WHEEL_SLOTS), dtype=DTYPE)
    for field, col in zip(
        ("count", "time_ms", "first", "last"), zip(*inputs.WHEEL_SLOTS, strict=True), strict=True
    ):
        slots[field] = col
    slots["crc"] = CRC.compute(slots.view(np.uint8).reshape(-1, SLOT_SIZE)[:, 4:])
    assert slots.tobytes() == raw
    for n, want in enumerate(inputs.WHEEL_SLOTS):
        crc, *fields = SLOT.unpack_from(raw, n * SLOT_SIZE)
        assert tuple(fields) == want
        assert zlib.crc32(raw[n * SLOT_SIZE + 4 : (n + 1) * SLOT_SIZE]) == crc


def test_file_headers() -> None:
    raw = golden("file_headers.bin")
    headers = [
        FileHeader(FileKind(magic), entry_size, base, tick, slots, stamp, version)
        for magic, version, entry_size, base, tick, slots, stamp in inputs.FILE_HEADERS
    ]
    assert b"".join(h.encode() for h in headers) == raw
    for n, h in enumerate(headers):
        chunk = raw[n * HEADER_SIZE : (n + 1) * HEADER_SIZE]
        assert FileHeader.decode(chunk, P, h.kind) == h
