"""Timer-log entry, version 2: 20 bytes, its wide fields as deltas from its segment.

Every field a version-1 entry (:mod:`timer_codec`) holds in 8 bytes is held in 4 here,
relative to what the entry's segment header and its own index say::

    offset size field
     0      4   crc        CRC-32 of bytes 4..20 (zlib polynomial)
     4      4   id_hash    CRC-32 of the UTF-8 delay-id (cancel and lookup filter)
     8      4   prev_back  index - index of the previous entry of the slot list; 0 = none
    12      4   tick_word  (slot tick - base tick + 2^29) | EntryType << 30
    16      4   cl_delta   commit-log position - the segment's commit-log base

The segment's :class:`Bases` are in its file header (``tick_ms``, ``slots`` = commit-log
base, ``stamp`` = base tick in ms), chosen when the segment is made from its first
batch; a batch they cannot hold (:func:`fits`) goes to a new segment. What no segment
can hold -- a list whose previous entry is 2^32 entries back -- raises
:class:`EntryOverflow`.

Pure Python and numpy by design, one function per job, so that it can be compiled
later: :func:`encode` / :func:`decode` (arrays), :func:`encode_one` / :func:`decode_one`
(one entry, struct and zlib only), :func:`crc` and :func:`bad_rows`. The decoded form
is always the wide in-memory entry of :data:`timer_codec.DTYPE` (its ``crc`` field 0:
the CRC is checked here, on the stored bytes).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from delaybridge.errors import IntegrityError
from delaybridge.fileformat import FixedCrc
from delaybridge.timerlog import timer_codec as wide

ENTRY = struct.Struct("<IIIII")  # crc, id_hash, prev_back, tick_word, cl_delta
ENTRY_SIZE = ENTRY.size
assert ENTRY_SIZE == 20

DTYPE = np.dtype(
    [
        ("crc", "<u4"),
        ("id_hash", "<u4"),
        ("prev_back", "<u4"),
        ("tick_word", "<u4"),
        ("cl_delta", "<u4"),
    ]
)
assert DTYPE.itemsize == ENTRY_SIZE

TYPE_SHIFT = 30
TICK_MASK = (1 << TYPE_SHIFT) - 1
TICK_BIAS = 1 << 29
"""A segment holds ticks within 2^29 ticks either side of its base tick."""
U32 = 1 << 32

Compact = npt.NDArray[np.void]
I64 = npt.NDArray[np.int64]

CRC = FixedCrc(ENTRY_SIZE - 4)


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
    out = np.empty(n, dtype=DTYPE)
    out["id_hash"] = id_hash
    out["prev_back"] = back
    out["tick_word"] = ((slot_ms - tick_base) // tick_ms + TICK_BIAS).astype(np.uint32) | (
        kinds.astype(np.uint32) << np.uint32(TYPE_SHIFT)
    )
    out["cl_delta"] = cl_pos - cl_base
    out["crc"] = crc(out)
    return out


def crc(raw: Compact) -> npt.NDArray[np.uint32]:
    """CRC-32 of bytes 4..20 of every stored entry."""
    return CRC.compute(raw.view(np.uint8).reshape(-1, ENTRY_SIZE)[:, 4:])


def bad_rows(raw: Compact) -> npt.NDArray[np.intp]:
    """Row numbers whose CRC does not match (a torn or flipped entry)."""
    return np.flatnonzero(crc(raw) != raw["crc"])


def decode(raw: Compact, indexes: I64, bases: Bases) -> wide.Entries:
    """Wide entries (``timer_codec.DTYPE``, ``crc`` 0) of stored entries at ``indexes``;
    no CRC check (see :func:`bad_rows`)."""
    tick_ms, cl_base, tick_base = bases
    out = np.empty(len(raw), dtype=wide.DTYPE)  # filled field by field, in place:
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
    cl[...] = word >> np.uint32(TYPE_SHIFT)
    cl <<= np.uint64(wide.TYPE_SHIFT)
    cl |= raw["cl_delta"].astype(np.uint64) + np.uint64(cl_base)
    return out


def encode_one(
    id_hash: int, prev: int, slot_ms: int, cl_pos: int, kind: int, index: int, bases: Bases
) -> bytes:
    """One stored entry (the scalar form of :func:`encode`; ValueError if it does not fit)."""
    tick_ms, cl_base, tick_base = bases
    back = 0 if prev < 0 else index - prev
    ticks, rest = divmod(slot_ms - tick_base, tick_ms)
    tick = ticks + TICK_BIAS
    cl = cl_pos - cl_base
    if not (0 <= back < U32 and 0 <= tick <= TICK_MASK and not rest and 0 <= cl < U32):
        raise EntryOverflow(f"timer-log entry {index} does not fit its segment's bases {bases}")
    if not 0 <= kind < 4:
        raise ValueError(f"timer-log entry {index}: type {kind} does not fit 2 bits")
    body = ENTRY.pack(0, id_hash, back, tick | kind << TYPE_SHIFT, cl)[4:]
    return struct.pack("<I", zlib.crc32(body)) + body


_KINDS = {int(k): k for k in wide.EntryType}


def decode_one(
    raw: bytes | memoryview | object, offset: int, path: Path, index: int, bases: Bases
) -> wide.TimerEntry:
    """The stored entry at ``offset``, CRC and type checked; IntegrityError names
    ``path``, the offset and the entry's index."""
    crc32, id_hash, back, word, cl = ENTRY.unpack_from(raw, offset)  # type: ignore[arg-type]
    if zlib.crc32(raw[offset + 4 : offset + ENTRY_SIZE]) != crc32:  # type: ignore[index]
        raise IntegrityError(f"{path}: offset {offset}: timer-log entry {index} CRC mismatch")
    kind = _KINDS.get(word >> TYPE_SHIFT)
    if kind is None:
        raise IntegrityError(
            f"{path}: offset {offset}: timer-log entry {index} has type {word >> TYPE_SHIFT}, "
            f"not one of {[int(k) for k in wide.EntryType]}"
        )
    tick_ms, cl_base, tick_base = bases
    slot_ms = ((word & TICK_MASK) - TICK_BIAS) * tick_ms + tick_base
    return wide.TimerEntry(id_hash, index - back if back else -1, slot_ms, cl_base + cl, kind)
