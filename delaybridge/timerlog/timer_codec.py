"""Timer-log entry format version 1: 32 fixed bytes pointing to a commit-log record.

Written by builds before timer log version 2 (now read only, from old segments), and
the wide in-memory form every reader of the timer log gets whatever the segment holds
(:mod:`compact_entry` is the 20-byte stored form of version 2).

Like RocketMQ's 52-byte TimerLog unit, each entry points to its message in the
commit log and to the previous entry of the same wheel slot, so a slot is a linked
list threaded through an append-only log. Ours is smaller and checked::

    offset size field
     0      4   crc       CRC-32 of bytes 4..32 (zlib polynomial, see fileformat)
     4      4   id_hash   CRC-32 of the UTF-8 delay-id: cancel and lookup scan this
     8      8   prev      timer-log index of the previous entry of this slot, -1 none
    16      8   slot_ms   absolute time of the wheel slot the entry sits in
    24      8   cl_word   commit-log byte position (low 56 bits) | EntryType << 56

The entry size (32) is in the file header instead of in every entry: all entries
have it. An entry's *index* (0, 1, 2, ... over the life of the store) is its
position; segment files are named by the index of their first entry.
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

ENTRY = struct.Struct(
    "<"
    "I"  # crc: CRC-32 of bytes 4..32
    "I"  # id_hash: CRC-32 of the delay-id
    "q"  # prev: index of the previous entry in this slot's list, -1 = first
    "q"  # slot_ms: time of the wheel slot
    "Q"  # cl_word: commit-log position | type << 56
)
ENTRY_SIZE = ENTRY.size
assert ENTRY_SIZE == 32

DTYPE = np.dtype(
    [
        ("crc", "<u4"),
        ("id_hash", "<u4"),
        ("prev", "<i8"),
        ("slot_ms", "<i8"),
        ("cl_word", "<u8"),
    ]
)
assert DTYPE.itemsize == ENTRY_SIZE

TYPE_SHIFT = 56
POS_MASK = (1 << TYPE_SHIFT) - 1

Entries = npt.NDArray[np.void]

CRC = FixedCrc(ENTRY_SIZE - 4)


class EntryType(IntEnum):
    """What reaching an entry's slot means."""

    MESSAGE = 1
    """Deliver the message."""
    ROLL = 2
    """The message is due beyond the window: re-enter it (copy forward) now."""
    ROLLED = 3
    """A message re-entered by a roll: deliver it, but it may sort before older
    entries of its tick (lists holding one are ordered by source offset)."""


def build(
    id_hash: npt.NDArray[np.uint32],
    prev: npt.NDArray[np.int64],
    slot_ms: npt.NDArray[np.int64],
    cl_pos: npt.NDArray[np.int64],
    kinds: npt.NDArray[np.uint64],
    *,
    crc: bool = True,
) -> Entries:
    """A structured array of entries with their CRCs filled in (``crc=False``: 0, for
    the timer log, which stores them as version-2 entries with their own CRC)."""
    entries = np.zeros(len(id_hash), dtype=DTYPE)
    entries["id_hash"] = id_hash
    entries["prev"] = prev
    entries["slot_ms"] = slot_ms
    entries["cl_word"] = cl_pos.astype(np.uint64) | (kinds << np.uint64(TYPE_SHIFT))
    if crc:
        entries["crc"] = CRC.compute(entries.view(np.uint8).reshape(-1, ENTRY_SIZE)[:, 4:])
    return entries


def bad_rows(entries: Entries) -> npt.NDArray[np.intp]:
    """Row numbers whose CRC does not match (a torn or flipped entry)."""
    rows = entries.view(np.uint8).reshape(-1, ENTRY_SIZE)
    return np.flatnonzero(CRC.compute(rows[:, 4:]) != entries["crc"])


def kinds_of(entries: Entries) -> npt.NDArray[np.uint64]:
    return entries["cl_word"] >> np.uint64(TYPE_SHIFT)


def positions_of(entries: Entries) -> npt.NDArray[np.int64]:
    return (entries["cl_word"] & np.uint64(POS_MASK)).astype(np.int64)


class TimerEntry(NamedTuple):
    """One decoded timer-log entry (its CRC checked); arrays of them use :data:`DTYPE`."""

    id_hash: int
    prev: int
    """Index of the previous entry of the same slot list, -1 for the first."""
    slot_ms: int
    cl_pos: int
    """Commit-log position of the entry's record."""
    kind: EntryType


_KINDS = {int(k): k for k in EntryType}


def decode_one(
    raw: bytes | memoryview | mmap.mmap, offset: int, path: Path, index: int
) -> TimerEntry:
    """The entry at ``offset``; IntegrityError naming ``path``, offset and ``index`` if damaged."""
    crc, id_hash, prev, slot_ms, word = ENTRY.unpack_from(raw, offset)
    if zlib.crc32(raw[offset + 4 : offset + ENTRY_SIZE]) != crc:
        raise IntegrityError(f"{path}: offset {offset}: timer-log entry {index} CRC mismatch")
    kind = _KINDS.get(word >> TYPE_SHIFT)
    if kind is None:
        raise IntegrityError(
            f"{path}: offset {offset}: timer-log entry {index} has type {word >> TYPE_SHIFT}, "
            f"not one of {[int(k) for k in EntryType]}"
        )
    return TimerEntry(id_hash, prev, slot_ms, word & POS_MASK, kind)
