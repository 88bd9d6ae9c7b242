"""The timer-log entry: what reaching it means, its wide form, and its 20 stored bytes.

Like RocketMQ's 52-byte TimerLog unit, each entry points to its message in the commit
log and to the previous entry of the same wheel slot, so a slot is a linked list
threaded through an append-only log. Ours is smaller and checked. An entry's *index*
(0, 1, 2, ... over the life of the store) is its position; segment files are named by
the index of their first entry, and the entry size is in each segment's file header
instead of in every entry.

**The wide entry**, 32 bytes: the stored form of format version 1 (segments written
before version 2, read only now) and the in-memory form every reader of the timer log
gets, whatever its segment stores (:data:`DTYPE`, :class:`TimerEntry`)::

    offset size field
     0      4   crc       CRC-32 of bytes 4..32 (zlib polynomial, see fileformat)
     4      4   id_hash   CRC-32 of the UTF-8 delay-id: cancel and lookup scan this
     8      8   prev      timer-log index of the previous entry of this slot, -1 none
    16      8   slot_ms   absolute time of the wheel slot the entry sits in
    24      8   cl_word   commit-log byte position (low 56 bits) | EntryType << 56

**The compact entry**, 20 bytes: the stored form of format version 2, every field the
wide entry holds in 8 bytes held in 4, relative to what the entry's segment header and
its own index say::

    offset size field
     0      4   crc        CRC-32 of bytes 4..20 (zlib polynomial)
     4      4   id_hash    CRC-32 of the UTF-8 delay-id (cancel and lookup filter)
     8      4   prev_back  index - index of the previous entry of the slot list; 0 = none
    12      4   tick_word  (slot tick - base tick + 2^29) | EntryType << 30
    16      4   cl_delta   commit-log position - the segment's commit-log base

A version-2 segment's :class:`Bases` are in its file header (``tick_ms``, ``slots`` =
commit-log base, ``stamp`` = base tick in ms), chosen when the segment is made from its
first batch; a batch they cannot hold (:func:`fits`) goes to a new segment. What no
segment can hold -- a list whose previous entry is 2^32 entries back -- raises
:class:`EntryOverflow`.

The codec, numpy and struct only, one function per job: :func:`build` (wide arrays),
:func:`encode` / :func:`decode` (compact arrays to and from wide ones, for the writer
and every reader), :func:`encode_one` / :func:`decode_one` and :func:`decode_wide_one`
(one entry, struct and zlib), :func:`bad_rows` / :func:`bad_wide_rows` (CRC checks,
vectorised). Which form a segment holds: :mod:`timer_segments`.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from enum import IntEnum
from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from delaybridge.errors import IntegrityError
from delaybridge.fileformat import FixedCrc

I64 = npt.NDArray[np.int64]


class EntryType(IntEnum):
    """What reaching an entry's slot means (the on-disk tag of both forms)."""

    MESSAGE = 1
    """Deliver the message."""
    ROLL = 2
    """The message is due beyond the window: re-enter it (copy forward) now."""
    ROLLED = 3
    """A message re-entered by a roll: deliver it, but it may sort before older
    entries of its tick (lists holding one are ordered by source offset)."""


_KINDS = {int(k): k for k in EntryType}


# -- the wide entry: version 1 on disk, every reader's form in memory -------------------

WIDE = struct.Struct(
    "<"
    "I"  # crc: CRC-32 of bytes 4..32
    "I"  # id_hash: CRC-32 of the delay-id
    "q"  # prev: index of the previous entry in this slot's list, -1 = first
    "q"  # slot_ms: time of the wheel slot
    "Q"  # cl_word: commit-log position | type << 56
)
WIDE_SIZE = WIDE.size
assert WIDE_SIZE == 32

DTYPE = np.dtype(
    [
        ("crc", "<u4"),
        ("id_hash", "<u4"),
        ("prev", "<i8"),
        ("slot_ms", "<i8"),
        ("cl_word", "<u8"),
    ]
)
"""The wide entry as a numpy record: arrays of entries (:data:`Entries`) use it."""
assert DTYPE.itemsize == WIDE_SIZE

TYPE_SHIFT = 56
"""Where the entry type sits in ``cl_word``."""
POS_MASK = (1 << TYPE_SHIFT) - 1
"""The commit-log position's bits of ``cl_word``."""

Entries = npt.NDArray[np.void]
"""Wide entries, :data:`DTYPE`."""

WIDE_CRC = FixedCrc(WIDE_SIZE - 4)


class TimerEntry(NamedTuple):
    """One decoded timer-log entry (its CRC checked); arrays of them use :data:`DTYPE`."""

    id_hash: int
    prev: int
    """Index of the previous entry of the same slot list, -1 for the first."""
    slot_ms: int
    cl_pos: int
    """Commit-log position of the entry's record."""
    kind: EntryType


def build(
    id_hash: npt.NDArray[np.uint32],
    prev: I64,
    slot_ms: I64,
    cl_pos: I64,
    kinds: npt.NDArray[np.uint64],
    *,
    crc: bool = True,
) -> Entries:
    """A structured array of wide entries with their CRCs filled in (``crc=False``: 0,
    for the timer log, which stores them as compact entries with their own CRC)."""
    entries = np.zeros(len(id_hash), dtype=DTYPE)
    entries["id_hash"] = id_hash
    entries["prev"] = prev
    entries["slot_ms"] = slot_ms
    entries["cl_word"] = cl_pos.astype(np.uint64) | (kinds << np.uint64(TYPE_SHIFT))
    if crc:
        entries["crc"] = WIDE_CRC.compute(entries.view(np.uint8).reshape(-1, WIDE_SIZE)[:, 4:])
    return entries


def bad_wide_rows(entries: Entries) -> npt.NDArray[np.intp]:
    """Row numbers of stored wide entries whose CRC does not match (torn or flipped)."""
    rows = entries.view(np.uint8).reshape(-1, WIDE_SIZE)
    return np.flatnonzero(WIDE_CRC.compute(rows[:, 4:]) != entries["crc"])


def kinds_of(entries: Entries) -> npt.NDArray[np.uint64]:
    return entries["cl_word"] >> np.uint64(TYPE_SHIFT)


def positions_of(entries: Entries) -> I64:
    return (entries["cl_word"] & np.uint64(POS_MASK)).astype(np.int64)


def decode_wide_one(
    raw: bytes | memoryview | mmap.mmap, offset: int, path: Path, index: int
) -> TimerEntry:
    """The stored wide entry at ``offset``; IntegrityError naming ``path``, offset and
    ``index`` if damaged."""
    crc, id_hash, prev, slot_ms, word = WIDE.unpack_from(raw, offset)
    if zlib.crc32(raw[offset + 4 : offset + WIDE_SIZE]) != crc:
        raise IntegrityError(f"{path}: offset {offset}: timer-log entry {index} CRC mismatch")
    return TimerEntry(
        id_hash, prev, slot_ms, word & POS_MASK, _kind(word >> TYPE_SHIFT, path, offset, index)
    )


def _kind(tag: int, path: Path, offset: int, index: int) -> EntryType:
    kind = _KINDS.get(tag)
    if kind is None:
        raise IntegrityError(
            f"{path}: offset {offset}: timer-log entry {index} has type {tag}, "
            f"not one of {[int(k) for k in EntryType]}"
        )
    return kind


# -- the compact entry: version 2 on disk, relative to its segment's bases --------------

COMPACT = struct.Struct(
    "<"
    "I"  # crc: CRC-32 of bytes 4..20
    "I"  # id_hash: CRC-32 of the delay-id
    "I"  # prev_back: index - the previous entry's index, 0 = first of its list
    "I"  # tick_word: (tick - base tick + TICK_BIAS) | type << COMPACT_TYPE_SHIFT
    "I"  # cl_delta: commit-log position - the segment's commit-log base
)
COMPACT_SIZE = COMPACT.size
assert COMPACT_SIZE == 20

COMPACT_DTYPE = np.dtype(
    [
        ("crc", "<u4"),
        ("id_hash", "<u4"),
        ("prev_back", "<u4"),
        ("tick_word", "<u4"),
        ("cl_delta", "<u4"),
    ]
)
assert COMPACT_DTYPE.itemsize == COMPACT_SIZE

COMPACT_TYPE_SHIFT = 30
"""Where the entry type sits in ``tick_word`` (2 bits)."""
TICK_MASK = (1 << COMPACT_TYPE_SHIFT) - 1
TICK_BIAS = 1 << 29
"""A segment holds ticks within 2^29 ticks either side of its base tick."""
U32 = 1 << 32

Compact = npt.NDArray[np.void]
"""Stored compact entries, :data:`COMPACT_DTYPE`."""

COMPACT_CRC = FixedCrc(COMPACT_SIZE - 4)
_U32 = struct.Struct("<I")


class EntryOverflow(ValueError):
    """An entry no segment can hold (its list's previous entry is 2^32 entries back)."""


class Bases(NamedTuple):
    """What a version-2 segment's entries are relative to (in its file header)."""

    tick_ms: int
    cl_base: int
    """Commit-log position that ``cl_delta`` 0 means."""
    tick_base_ms: int
    """Slot time that tick 0 (stored as 2^29) means."""


def bases_for(slot_ms: I64, cl_pos: I64, tick_ms: int) -> Bases:
    """Bases for a new segment whose first batch this is (its ticks at the centre)."""
    return Bases(tick_ms, int(cl_pos.min()), int(slot_ms.min()))


def fits(slot_ms: I64, cl_pos: I64, bases: Bases) -> bool:
    """Whether a segment with ``bases`` can hold these entries' ticks and positions."""
    tick_ms, cl_base, tick_base = bases
    ticks = (slot_ms - tick_base) // tick_ms + TICK_BIAS
    cl = cl_pos - cl_base
    return bool(
        ticks.min() >= 0
        and ticks.max() <= TICK_MASK
        and cl.min() >= 0
        and cl.max() < U32
        and not ((slot_ms - tick_base) % tick_ms).any()
    )


def encode(
    id_hash: npt.NDArray[np.uint32],
    prev: I64,
    slot_ms: I64,
    cl_pos: I64,
    kinds: npt.NDArray[np.uint64],
    first_index: int,
    bases: Bases,
) -> Compact:
    """The stored entries (CRC filled) for entries ``first_index``, ``first_index + 1``..;
    the caller checked :func:`fits`; EntryOverflow if a ``prev`` is too far back."""
    n = len(id_hash)
    indexes = np.arange(first_index, first_index + n, dtype=np.int64)
    back = np.where(prev < 0, 0, indexes - prev)
    if n and (int(back.max()) >= U32 or int(back.min()) < 0):
        row = int(np.flatnonzero((back >= U32) | (back < 0))[0])
        raise EntryOverflow(
            f"timer-log entry {first_index + row}: previous entry of its list {int(prev[row])} "
            "is 2^32 or more entries back (or ahead)"
        )
    tick_ms, cl_base, tick_base = bases
    out = np.empty(n, dtype=COMPACT_DTYPE)
    out["id_hash"] = id_hash
    out["prev_back"] = back
    out["tick_word"] = ((slot_ms - tick_base) // tick_ms + TICK_BIAS).astype(np.uint32) | (
        kinds.astype(np.uint32) << np.uint32(COMPACT_TYPE_SHIFT)
    )
    out["cl_delta"] = cl_pos - cl_base
    out["crc"] = compact_crc(out)
    return out


def compact_crc(raw: Compact) -> npt.NDArray[np.uint32]:
    """CRC-32 of bytes 4..20 of every stored compact entry."""
    return COMPACT_CRC.compute(raw.view(np.uint8).reshape(-1, COMPACT_SIZE)[:, 4:])


def bad_rows(raw: Compact) -> npt.NDArray[np.intp]:
    """Row numbers of stored compact entries whose CRC does not match (torn or flipped)."""
    return np.flatnonzero(compact_crc(raw) != raw["crc"])


def decode(raw: Compact, indexes: I64, bases: Bases) -> Entries:
    """Wide entries (``crc`` 0) of stored compact entries at ``indexes``; no CRC check
    (see :func:`bad_rows`)."""
    tick_ms, cl_base, tick_base = bases
    out = np.empty(len(raw), dtype=DTYPE)  # filled field by field, in place:
    out["crc"] = 0  # few temporaries (recovery decodes 1 Mi entries at a time)
    out["id_hash"] = raw["id_hash"]
    back = raw["prev_back"]
    prev = out["prev"]
    prev[...] = indexes
    prev -= back
    prev[back == 0] = -1
    word = raw["tick_word"]
    slot = out["slot_ms"]
    slot[...] = word & np.uint32(TICK_MASK)
    slot -= TICK_BIAS
    slot *= tick_ms
    slot += tick_base
    cl = out["cl_word"]
    cl[...] = word >> np.uint32(COMPACT_TYPE_SHIFT)
    cl <<= np.uint64(TYPE_SHIFT)
    cl |= raw["cl_delta"].astype(np.uint64) + np.uint64(cl_base)
    return out


def encode_one(
    id_hash: int, prev: int, slot_ms: int, cl_pos: int, kind: int, index: int, bases: Bases
) -> bytes:
    """One stored compact entry (the scalar form of :func:`encode`; EntryOverflow if it
    does not fit its bases, ValueError if ``kind`` does not fit its 2 bits)."""
    tick_ms, cl_base, tick_base = bases
    back = 0 if prev < 0 else index - prev
    ticks, rest = divmod(slot_ms - tick_base, tick_ms)
    tick = ticks + TICK_BIAS
    cl = cl_pos - cl_base
    if not (0 <= back < U32 and 0 <= tick <= TICK_MASK and not rest and 0 <= cl < U32):
        raise EntryOverflow(f"timer-log entry {index} does not fit its segment's bases {bases}")
    if not 0 <= kind < 4:
        raise ValueError(f"timer-log entry {index}: type {kind} does not fit 2 bits")
    body = COMPACT.pack(0, id_hash, back, tick | kind << COMPACT_TYPE_SHIFT, cl)[4:]
    return _U32.pack(zlib.crc32(body)) + body


def decode_one(
    raw: bytes | memoryview | mmap.mmap, offset: int, path: Path, index: int, bases: Bases
) -> TimerEntry:
    """The stored compact entry at ``offset``, CRC and type checked; IntegrityError
    names ``path``, the offset and the entry's index."""
    crc32, id_hash, back, word, cl = COMPACT.unpack_from(raw, offset)
    if zlib.crc32(raw[offset + 4 : offset + COMPACT_SIZE]) != crc32:
        raise IntegrityError(f"{path}: offset {offset}: timer-log entry {index} CRC mismatch")
    kind = _kind(word >> COMPACT_TYPE_SHIFT, path, offset, index)
    tick_ms, cl_base, tick_base = bases
    slot_ms = ((word & TICK_MASK) - TICK_BIAS) * tick_ms + tick_base
    return TimerEntry(id_hash, index - back if back else -1, slot_ms, cl_base + cl, kind)
