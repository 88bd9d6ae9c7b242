"""The commit-log record (``commit_record``): both layouts, the codec, damage.

Round trips of the wide (type 1) and the compact (type 2) layout, the fallback to the
wide layout for every field that does not fit the compact one, damage detection, and
the readers that look at fixed offsets (``due_of``, ``source_offset_of``: rolls and the
ROLLED sort; ``index_encoded``: changelog values). Byte-for-byte agreement with what
505b445 wrote: ``test_golden_formats.py``.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import TimerRecord, changelog_record, commit_codec
from delaybridge.timerlog.commit_record import (
    COMPACT_SIZE,
    WIDE_SIZE,
    RecordType,
    check,
    due_of,
    source_offset_of,
)
from tests.unit.timerlog.support import START_MS

# Once per implementation of the hot path: pure Python, and compiled where built
# (tests/unit/hot_impl.py).
pytestmark = pytest.mark.usefixtures("hot_impl")

P = Path("f")
maybe_bytes = st.one_of(st.none(), st.binary(max_size=64))
fitting = st.builds(
    TimerRecord,
    id=st.text(min_size=1, max_size=60),
    due_ms=st.integers(START_MS - 2**31, START_MS + 2**31 - 1),
    target_topic=st.text(alphabet="abcxyz-._", min_size=1, max_size=60),
    target_partition=st.integers(-1, 2**15 - 1),
    key=maybe_bytes,
    value=maybe_bytes,
    headers=st.lists(st.tuples(st.text(max_size=10), maybe_bytes), max_size=4).map(tuple),
    source_offset=st.integers(0, 2**32 - 1),
    source_timestamp_ms=st.just(START_MS),
)


def one(rec: TimerRecord, compact: bool = True) -> bytes:
    return b"".join(commit_codec.encode_batch([rec], compact).parts)


def kind(raw: bytes) -> int:
    return raw[8]


def payload(rec: TimerRecord) -> int:
    heads = sum(6 + len(n.encode()) + len(v or b"") for n, v in rec.headers)
    return (
        len(rec.id.encode())
        + len(rec.target_topic)
        + len(rec.key or b"")
        + heads
        + len(rec.value or b"")
    )


any_record = st.builds(
    TimerRecord,
    id=st.text(min_size=1, max_size=40),
    due_ms=st.integers(-(2**62), 2**62),
    target_topic=st.text(alphabet="abcxyz-._", min_size=1, max_size=30),
    target_partition=st.integers(-1, 2**31 - 1),
    key=maybe_bytes,
    value=maybe_bytes,
    headers=st.lists(st.tuples(st.text(max_size=10), maybe_bytes), max_size=4).map(tuple),
    source_offset=st.integers(0, 2**62),
    source_timestamp_ms=st.integers(0, 2**62),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(any_record, min_size=1, max_size=5))
def test_commit_records_round_trip(batch: list[TimerRecord]) -> None:
    enc = commit_codec.encode_batch(batch)
    raw = b"".join(enc.parts)
    off = 0
    for rec, size, h in zip(batch, enc.sizes, enc.id_hashes, strict=True):
        assert check(raw, off, len(raw), P, off) == size
        assert commit_codec.decode(raw, off, P) == rec
        assert h == zlib.crc32(rec.id.encode())
        off += size


@settings(max_examples=60, deadline=None)
@given(any_record, st.data())
def test_any_flipped_bit_of_a_commit_record_is_caught(
    rec: TimerRecord, data: st.DataObject
) -> None:
    raw = bytearray(b"".join(commit_codec.encode_batch([rec]).parts))
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(IntegrityError, match="offset 0"):
        check(bytes(raw), 0, len(raw), P, 0)


@settings(max_examples=120, deadline=None)
@given(fitting)
def test_a_record_that_fits_is_compact_and_round_trips(rec: TimerRecord) -> None:
    raw = one(rec)
    assert kind(raw) == RecordType.COMPACT
    assert len(raw) == COMPACT_SIZE + payload(rec)
    assert check(raw, 0, len(raw), P, 0) == len(raw)
    assert commit_codec.decode(raw, 0, P) == rec
    assert due_of(raw) == rec.due_ms and source_offset_of(raw) == rec.source_offset
    wide = one(rec, compact=False)
    assert kind(wide) == RecordType.WIDE
    assert len(wide) == WIDE_SIZE + payload(rec)
    assert commit_codec.decode(wide, 0, P) == rec
    assert due_of(wide) == rec.due_ms and source_offset_of(wide) == rec.source_offset


@settings(max_examples=80, deadline=None)
@given(fitting, st.data())
def test_any_flipped_bit_of_a_compact_record_is_caught(
    rec: TimerRecord, data: st.DataObject
) -> None:
    raw = bytearray(one(rec))
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(IntegrityError, match="offset 0"):
        check(bytes(raw), 0, len(raw), P, 0)
    try:  # decoding either refuses it or reads what was written (a length past the
        # buffer's end reads the same bytes: harmless there, and check() refuses it)
        assert commit_codec.decode(bytes(raw), 0, P) == rec
        assert bit < 32
    except IntegrityError as exc:
        assert "offset 0" in str(exc)


BASE = TimerRecord("id-1", START_MS + 5_000, "orders", 3, b"k", b"v", (), 7, START_MS)
DAY = 86_400_000


@pytest.mark.parametrize(
    "change",
    [
        {"id": "x" * 256},
        {"target_topic": "t" * 256},
        {"key": b"k" * 65_536},
        {"target_partition": 2**15},
        {"due_ms": START_MS + 25 * DAY},
        {"due_ms": START_MS - 25 * DAY},
        {"source_timestamp_ms": -(2**40), "due_ms": 5},
        {"source_offset": 2**32},
        {"source_offset": -1},
        {"headers": tuple((f"h{i}", None) for i in range(256))},
    ],
)
def test_a_field_the_compact_layout_cannot_hold_falls_back_to_wide(
    change: dict[str, object],
) -> None:
    rec = BASE._replace(**change)  # type: ignore[arg-type]
    raw = one(rec)
    assert kind(one(BASE)) == RecordType.COMPACT
    assert kind(raw) == RecordType.WIDE
    assert commit_codec.decode(raw, 0, P) == rec
    assert due_of(raw) == rec.due_ms and source_offset_of(raw) == rec.source_offset


def test_fields_running_past_a_compact_record_are_malformed_not_misread() -> None:
    raw = bytearray(one(BASE._replace(value=None, key=b"key")))
    raw[13:15] = struct.pack("<H", 1_000)  # key_len past the end, CRC made to match
    raw[4:8] = struct.pack("<I", zlib.crc32(raw[8:]))
    with pytest.raises(IntegrityError, match="offset 0: malformed record"):
        commit_codec.decode(bytes(raw), 0, P)


def test_an_unknown_record_type_is_refused_by_check_and_decode() -> None:
    raw = bytearray(one(BASE))
    raw[8] = 3
    raw[4:8] = struct.pack("<I", zlib.crc32(raw[8:]))
    for read in (
        lambda: check(bytes(raw), 0, len(raw), P, 0),
        lambda: commit_codec.decode(bytes(raw), 0, P),
        lambda: commit_codec.index_encoded([bytes(raw)], "changelog"),
    ):
        with pytest.raises(IntegrityError, match="unknown record type 3"):
            read()


def test_changelog_values_of_both_versions_index_like_an_encoded_batch() -> None:
    recs = [BASE, BASE._replace(id="id-2", source_offset=9, due_ms=START_MS + 40 * DAY)]
    enc = commit_codec.encode_batch(recs)
    old = [b"\x01" + one(r, compact=False) for r in recs]  # written before version 2
    new = [changelog_record.value_of(r) for r in enc.records()]
    assert [v[0] for v in new] == [2, 2] and [kind(v[1:]) for v in new] == [2, 1]
    for values in (old, new, [old[0], new[1]]):
        got = commit_codec.index_encoded(values, "changelog", skip=1)
        assert (got.id_hashes, got.due_ms, got.topics) == (enc.id_hashes, enc.due_ms, enc.topics)
        assert got.max_source_offset == 9
        for v in values:
            assert commit_codec.decode(bytes(changelog_record.record_of(v, "c")), 0, P) in recs
    with pytest.raises(IntegrityError, match="changelog value version 3"):
        changelog_record.record_of(b"\x03" + one(BASE), "c")
