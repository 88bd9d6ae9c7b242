"""Round trips and damage detection of each on-disk format."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import TimerRecord, cancel_codec, commit_codec, timer_codec
from delaybridge.timerlog.checkpoint import Checkpoint
from delaybridge.wheel.file_header import FileHeader, FileKind

P = Path("f")
maybe_bytes = st.one_of(st.none(), st.binary(max_size=64))
records = st.builds(
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
@given(st.lists(records, min_size=1, max_size=5))
def test_commit_records_round_trip(batch: list[TimerRecord]) -> None:
    enc = commit_codec.encode_batch(batch)
    raw = b"".join(enc.parts)
    off = 0
    for rec, size, h in zip(batch, enc.sizes, enc.id_hashes, strict=True):
        assert commit_codec.check(raw, off, len(raw), P, off) == size
        assert commit_codec.decode(raw, off, P) == rec
        assert h == zlib.crc32(rec.id.encode())
        off += size


@settings(max_examples=60, deadline=None)
@given(records, st.data())
def test_any_flipped_bit_of_a_commit_record_is_caught(rec: TimerRecord,
                                                      data: st.DataObject) -> None:
    raw = bytearray(b"".join(commit_codec.encode_batch([rec]).parts))
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(IntegrityError, match="offset 0"):
        commit_codec.check(bytes(raw), 0, len(raw), P, 0)


def test_timer_entries_pack_type_and_position_and_check_crc() -> None:
    e = timer_codec.build(np.array([7, 8], np.uint32), np.array([-1, 0], np.int64),
                          np.array([100, 200], np.int64), np.array([0, 2**50], np.int64),
                          np.array([1, 2], np.uint64))
    assert timer_codec.kinds_of(e).tolist() == [1, 2]
    assert timer_codec.positions_of(e).tolist() == [0, 2**50]
    raw = e.tobytes()
    assert zlib.crc32(raw[4:32]) == int(e["crc"][0])  # plain zlib can check an entry
    assert len(timer_codec.bad_rows(e)) == 0
    damaged = bytearray(raw)
    damaged[40] ^= 0x10
    bad = np.frombuffer(bytes(damaged), dtype=timer_codec.DTYPE)
    assert timer_codec.bad_rows(bad).tolist() == [1]


@pytest.mark.parametrize("item", [cancel_codec.Applied(5, 1_000),
                                  cancel_codec.Waiting(9, "id-1", None),
                                  cancel_codec.Waiting(9, "id-2", "orders"),
                                  cancel_codec.Resolved(64)])
def test_cancel_records_round_trip_and_detect_damage(item: cancel_codec.Decoded) -> None:
    raw = cancel_codec.encode(item)
    assert cancel_codec.decode(raw, 0, P, 0) == (item, len(raw))
    for i in range(len(raw)):
        damaged = bytearray(raw)
        damaged[i] ^= 0x01
        with pytest.raises(IntegrityError):
            cancel_codec.decode(bytes(damaged), 0, P, 0)


def test_file_header_round_trip_and_wrong_kind(tmp_path: Path) -> None:
    h = FileHeader(FileKind.TIMER_LOG, 32, 4096, 100, 864_000, 7)
    assert FileHeader.decode(h.encode(), P, FileKind.TIMER_LOG) == h
    with pytest.raises(IntegrityError, match="magic"):
        FileHeader.decode(h.encode(), P, FileKind.COMMIT_LOG)


def test_checkpoint_round_trip_and_damage(tmp_path: Path) -> None:
    ck = Checkpoint(100, 64, commit_end=10, timer_end=2, pending_by_topic={"a": 2})
    ck.save(tmp_path)
    assert Checkpoint.load(tmp_path) == ck
    raw = bytearray((tmp_path / "checkpoint").read_bytes())
    raw[-2] ^= 1
    (tmp_path / "checkpoint").write_bytes(bytes(raw))
    with pytest.raises(IntegrityError, match="checkpoint CRC"):
        Checkpoint.load(tmp_path)
