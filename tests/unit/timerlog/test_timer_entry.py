"""The timer-log entry (``timer_entry``): the wide form and the 20-byte compact one.

The wide entry (version 1 on disk, every reader's form in memory) packs its type and
position and checks its CRC. The compact entry has a model test: the model is the wide
entry (``TimerEntry``): whatever fits a segment's bases must come back field for field,
through the array codec and the scalar one alike (and the two must write the same
bytes); what does not fit must be refused, never wrapped; and any damage -- a flipped
bit, hostile bytes -- must be caught by the CRC or the type check, naming the file, the
offset and the entry. Byte-for-byte agreement with what 505b445 wrote:
``test_golden_formats.py``.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import timer_entry
from delaybridge.timerlog.timer_entry import EntryType, TimerEntry

P = Path("seg.tlog")
WIDE_P = Path("f")
TICK = 100
BASES = timer_entry.Bases(TICK, 5_000_000_000, 1_700_000_000_000)
I64 = npt.NDArray[np.int64]
KINDS = st.sampled_from([int(k) for k in EntryType])


def test_timer_entries_pack_type_and_position_and_check_crc() -> None:
    e = timer_entry.build(
        np.array([7, 8], np.uint32),
        np.array([-1, 0], np.int64),
        np.array([100, 200], np.int64),
        np.array([0, 2**50], np.int64),
        np.array([1, 2], np.uint64),
    )
    assert timer_entry.kinds_of(e).tolist() == [1, 2]
    assert timer_entry.positions_of(e).tolist() == [0, 2**50]
    raw = e.tobytes()
    assert zlib.crc32(raw[4:32]) == int(e["crc"][0])  # plain zlib can check an entry
    assert len(timer_entry.bad_wide_rows(e)) == 0
    damaged = bytearray(raw)
    damaged[40] ^= 0x10
    bad = np.frombuffer(bytes(damaged), dtype=timer_entry.DTYPE)
    assert timer_entry.bad_wide_rows(bad).tolist() == [1]


def test_one_timer_entry_decodes_by_name_and_names_the_damage() -> None:
    raw = timer_entry.build(
        np.array([7, 8], np.uint32),
        np.array([-1, 0], np.int64),
        np.array([100, 200], np.int64),
        np.array([0, 2**50], np.int64),
        np.array([1, 3], np.uint64),
    ).tobytes()
    entry = timer_entry.decode_wide_one(raw, 32, WIDE_P, 41)
    assert entry == timer_entry.TimerEntry(
        id_hash=8, prev=0, slot_ms=200, cl_pos=2**50, kind=timer_entry.EntryType.ROLLED
    )
    damaged = bytearray(raw)
    damaged[40] ^= 0x10
    with pytest.raises(IntegrityError, match=r"^f: offset 32: timer-log entry 41 CRC mismatch"):
        timer_entry.decode_wide_one(bytes(damaged), 32, WIDE_P, 41)
    one = np.array([0], np.int64)
    unknown = timer_entry.build(  # a valid CRC over a type no writer uses
        np.array([1], np.uint32), one, one, one, np.array([9], np.uint64)
    ).tobytes()
    with pytest.raises(IntegrityError, match=r"^f: offset 0: timer-log entry 0 has type 9,"):
        timer_entry.decode_wide_one(unknown, 0, WIDE_P, 0)


@st.composite
def batches(draw: st.DrawFn) -> tuple[int, list[TimerEntry]]:
    """A first index and entries that fit :data:`BASES` (every field at its edges too)."""
    first = draw(st.integers(0, 2**40))
    n = draw(st.integers(1, 30))
    out = []
    for i in range(n):
        index = first + i
        back = draw(
            st.one_of(st.just(0), st.integers(1, min(index, 2**32 - 1)) if index else st.just(0))
        )
        tick = draw(
            st.one_of(
                st.sampled_from([0, timer_entry.TICK_MASK]), st.integers(0, timer_entry.TICK_MASK)
            )
        )
        cl = draw(st.one_of(st.sampled_from([0, 2**32 - 1]), st.integers(0, 2**32 - 1)))
        out.append(
            TimerEntry(
                id_hash=draw(st.integers(0, 2**32 - 1)),
                prev=index - back if back else -1,
                slot_ms=BASES.tick_base_ms + (tick - timer_entry.TICK_BIAS) * TICK,
                cl_pos=BASES.cl_base + cl,
                kind=EntryType(draw(KINDS)),
            )
        )
    return first, out


Arrays = tuple[npt.NDArray[np.uint32], I64, I64, I64, npt.NDArray[np.uint64]]


def arrays(entries: list[TimerEntry]) -> Arrays:
    return (
        np.array([e.id_hash for e in entries], np.uint32),
        np.array([e.prev for e in entries], np.int64),
        np.array([e.slot_ms for e in entries], np.int64),
        np.array([e.cl_pos for e in entries], np.int64),
        np.array([int(e.kind) for e in entries], np.uint64),
    )


@settings(max_examples=150, deadline=None)
@given(batches())
def test_entries_round_trip_through_both_codecs(batch: tuple[int, list[TimerEntry]]) -> None:
    first, entries = batch
    hashes, prev, slot, cl, kinds = arrays(entries)
    assert timer_entry.fits(slot, cl, BASES)
    raw = timer_entry.encode(hashes, prev, slot, cl, kinds, first, BASES)
    data = raw.tobytes()
    assert len(data) == 20 * len(entries)
    assert len(timer_entry.bad_rows(raw)) == 0
    indexes = np.arange(first, first + len(entries), dtype=np.int64)
    wide = timer_entry.decode(raw, indexes, BASES)
    for i, e in enumerate(entries):
        one = timer_entry.encode_one(
            e.id_hash, e.prev, e.slot_ms, e.cl_pos, int(e.kind), first + i, BASES
        )
        assert one == data[20 * i : 20 * i + 20]  # the scalar codec writes the same bytes
        assert timer_entry.decode_one(data, 20 * i, P, first + i, BASES) == e
        w = wide[i]
        got = (int(w["id_hash"]), int(w["prev"]), int(w["slot_ms"]))
        assert got == (e.id_hash, e.prev, e.slot_ms)
    assert timer_entry.positions_of(wide).tolist() == [e.cl_pos for e in entries]
    assert timer_entry.kinds_of(wide).tolist() == [int(e.kind) for e in entries]


@settings(max_examples=150, deadline=None)
@given(batches(), st.data())
def test_any_flipped_bit_is_caught_and_named(
    batch: tuple[int, list[TimerEntry]], data: st.DataObject
) -> None:
    first, entries = batch
    raw = bytearray(timer_entry.encode(*arrays(entries), first, BASES).tobytes())
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    row = bit // 8 // 20
    stored = np.frombuffer(bytes(raw), timer_entry.COMPACT_DTYPE)
    assert timer_entry.bad_rows(stored).tolist() == [row]
    with pytest.raises(
        IntegrityError, match=rf"seg\.tlog: offset {20 * row}: timer-log entry {first + row} CRC"
    ):
        timer_entry.decode_one(bytes(raw), 20 * row, P, first + row, BASES)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=20, max_size=20), st.booleans())
def test_hostile_bytes_are_refused_or_decode_within_the_bases(raw: bytes, fix_crc: bool) -> None:
    """Any 20 bytes: refused (CRC, type), or an entry whose fields lie inside what the
    bases allow -- never an exception of another kind, never a position below the base."""
    if fix_crc:  # a valid CRC over garbage: only the type check and the bounds are left
        raw = zlib.crc32(raw[4:]).to_bytes(4, "little") + raw[4:]
    try:
        e = timer_entry.decode_one(raw, 0, P, 7, BASES)
    except IntegrityError as exc:
        assert "seg.tlog: offset 0: timer-log entry 7" in str(exc)
        return
    assert fix_crc or zlib.crc32(raw[4:]) == int.from_bytes(raw[:4], "little")
    assert e.kind in set(EntryType)
    assert BASES.cl_base <= e.cl_pos < BASES.cl_base + 2**32
    assert e.prev < 7
    assert abs(e.slot_ms - BASES.tick_base_ms) <= timer_entry.TICK_BIAS * TICK
    arr = np.frombuffer(raw, timer_entry.COMPACT_DTYPE)
    assert len(timer_entry.bad_rows(arr)) == 0
    assert timer_entry.decode(arr, np.array([7]), BASES)["slot_ms"].tolist() == [e.slot_ms]


def test_what_does_not_fit_is_refused_never_wrapped() -> None:
    one = np.array([1], np.int64)
    slot = np.array([BASES.tick_base_ms], np.int64)
    cl = np.array([BASES.cl_base], np.int64)
    assert timer_entry.fits(slot, cl, BASES)
    for bad_slot, bad_cl in (
        (BASES.tick_base_ms + timer_entry.TICK_BIAS * TICK, BASES.cl_base),  # one tick too far
        (BASES.tick_base_ms - (timer_entry.TICK_BIAS + 1) * TICK, BASES.cl_base),
        (BASES.tick_base_ms + 1, BASES.cl_base),  # not on a tick
        (BASES.tick_base_ms, BASES.cl_base + 2**32),
        (BASES.tick_base_ms, BASES.cl_base - 1),
    ):
        assert not timer_entry.fits(np.array([bad_slot]), np.array([bad_cl]), BASES)
        with pytest.raises(timer_entry.EntryOverflow):
            timer_entry.encode_one(1, -1, bad_slot, bad_cl, 1, 5, BASES)
    with pytest.raises(timer_entry.EntryOverflow, match="entry 4294967296"):
        timer_entry.encode(
            np.array([1], np.uint32), np.array([0]), slot, cl, one.astype(np.uint64), 2**32, BASES
        )
    edge = timer_entry.encode(
        np.array([1], np.uint32), np.array([1]), slot, cl, one.astype(np.uint64), 2**32, BASES
    )
    assert int(edge["prev_back"][0]) == 2**32 - 1


def test_bases_for_a_batch_centre_its_ticks() -> None:
    slot = np.array([1_700_000_000_500, 1_700_000_000_100], np.int64)
    cl = np.array([900, 1_000], np.int64)
    bases = timer_entry.bases_for(slot, cl, TICK)
    assert bases == timer_entry.Bases(TICK, 900, 1_700_000_000_100)
    assert timer_entry.fits(slot, cl, bases)
    raw = timer_entry.encode(
        np.array([1, 2], np.uint32),
        np.array([-1, 10]),
        slot,
        cl,
        np.array([1, 2], np.uint64),
        11,
        bases,
    )
    assert timer_entry.decode(raw, np.array([11, 12]), bases)["prev"].tolist() == [-1, 10]
