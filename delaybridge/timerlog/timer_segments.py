"""Per-segment decoding of the timer log: which entry format a segment holds.

A timer-log segment of format version 1 holds 32-byte entries (:mod:`timer_codec`),
one of version 2 holds 20-byte entries (:mod:`compact_entry`) relative to the
:class:`~compact_entry.Bases` in its header: ``tick_ms``, ``slots`` = the commit-log
base, ``stamp`` = the base tick's time. Both are read into the wide in-memory entry
(``timer_codec.DTYPE``), so nothing above the timer log sees which one a segment is.
Log positions count 32 per entry in both (:data:`UNIT`): a position is ``index * 32``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind
from delaybridge.timerlog import compact_entry as compact
from delaybridge.timerlog import timer_codec as codec
from delaybridge.timerlog.segments import Segment

__all__ = ["ENTRY_SIZES", "UNIT", "Segment", "bad_rows", "bases_of", "decode", "header"]

UNIT = codec.ENTRY_SIZE
"""Log positions per entry, whatever a segment stores (the version-1 entry size)."""
ENTRY_SIZES = {1: codec.ENTRY_SIZE, 2: compact.ENTRY_SIZE}
"""Bytes per entry by the segment's format version."""
I64 = npt.NDArray[np.int64]


def header(bases: compact.Bases) -> FileHeader:
    """The header of a new version-2 segment (its ``base`` is set when it is made)."""
    return FileHeader(
        FileKind.TIMER_LOG, compact.ENTRY_SIZE, 0, bases.tick_ms, bases.cl_base, bases.tick_base_ms
    )


def bases_of(seg: Segment) -> compact.Bases | None:
    """The bases of a version-2 segment; None for version 1 (absolute fields)."""
    if seg.entry_size != compact.ENTRY_SIZE or seg.header is None:
        return None
    h = seg.header
    return compact.Bases(h.tick_ms, h.slots, h.stamp)


def view(seg: Segment, offset: int, count: int) -> npt.NDArray[np.void]:
    """``count`` stored entries from file ``offset`` (no copy)."""
    dtype = codec.DTYPE if seg.entry_size == codec.ENTRY_SIZE else compact.DTYPE
    return np.frombuffer(seg.map(), dtype=dtype, count=count, offset=offset)


def take(seg: Segment, rows: I64) -> npt.NDArray[np.void]:
    """Copies of the stored entries at ``rows`` (0 = the segment's first entry):
    ``np.take`` over 4-byte words, ~10x faster than fancy indexing a structured array."""
    words = seg.entry_size // 4
    table = np.frombuffer(seg.map(), np.uint32, seg.capacity // UNIT * words, HEADER_SIZE)
    got = np.take(table.reshape(-1, words), rows, axis=0)
    dtype = codec.DTYPE if seg.entry_size == codec.ENTRY_SIZE else compact.DTYPE
    return got.view(dtype).reshape(-1)


def decode(seg: Segment, raw: npt.NDArray[np.void], indexes: int | I64) -> codec.Entries:
    """Wide entries (a copy) of stored entries ``raw`` at ``indexes`` (or from one)."""
    bases = bases_of(seg)
    if bases is None:
        return raw.copy()
    if isinstance(indexes, int):
        indexes = np.arange(indexes, indexes + len(raw), dtype=np.int64)
    return compact.decode(raw, indexes, bases)


def bad_rows(seg: Segment, raw: npt.NDArray[np.void]) -> npt.NDArray[np.intp]:
    """Rows of ``raw`` (stored entries of ``seg``) whose CRC does not match."""
    if bases_of(seg) is None:
        return codec.bad_rows(raw)
    return compact.bad_rows(raw)


def decode_one(seg: Segment, offset: int, index: int) -> codec.TimerEntry:
    """The entry at file ``offset``, CRC checked (IntegrityError names file and offset)."""
    bases = bases_of(seg)
    if bases is None:
        return codec.decode_one(seg.map(), offset, seg.path, index)
    return compact.decode_one(seg.map(), offset, seg.path, index, bases)
