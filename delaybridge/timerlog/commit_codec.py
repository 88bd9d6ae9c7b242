"""Commit-log records: encode a batch, decode records for delivery.

The layouts (wide, type 1, and compact, type 2) are drawn in :mod:`commit_format`;
this module re-exports its names. ``encode_batch`` writes the compact layout for
every record whose fields fit it (ids and topics <= 255 bytes, keys <= 64 KiB, a
partition < 32,768, a delay within +-24.8 days of the source timestamp, an offset
below 2**32) and the wide one otherwise; ``decode_many`` reads both.

The loops themselves are in :mod:`codec_core`, compiled with mypyc where a matching
build is installed (``delaybridge/hotpath.py``); this module calls whichever is in use.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from delaybridge import hotpath
from delaybridge.timerlog import codec_core
from delaybridge.timerlog.commit_format import (
    COMPACT,
    COMPACT_SIZE,
    FIELDS,
    FIXED_SIZE,
    HEADER_ITEM,
    MAX_ID_BYTES,
    MIN_SIZE,
    NULL_KEY,
    NULL_VALUE,
    PREFIX,
    EncodedBatch,
    RecordType,
    check,
    due_of,
    record_length,
    source_offset_of,
)
from delaybridge.timerlog.records import TimerRecord

__all__ = [
    "COMPACT",
    "COMPACT_SIZE",
    "FIELDS",
    "FIXED_SIZE",
    "HEADER_ITEM",
    "MAX_ID_BYTES",
    "MIN_SIZE",
    "NULL_KEY",
    "NULL_VALUE",
    "PREFIX",
    "EncodedBatch",
    "RecordType",
    "check",
    "decode",
    "decode_many",
    "due_of",
    "encode_batch",
    "encode_headers",
    "record_length",
    "source_offset_of",
]

#: The codec in use: ``codec_core`` compiled when a matching build is installed, else
#: the module itself (``delaybridge/hotpath.py``). Tests swap it to run both.
_core: ModuleType = hotpath.select(codec_core)


def encode_batch(records: Sequence[TimerRecord], compact: bool = True) -> EncodedBatch:
    """Encode records: one ``pack``, one join and two CRCs per record, nothing more.

    Compact layout where the record fits it (unless ``compact`` is false: the wide
    layout of format version 1, for tests and fixtures), wide otherwise. Raises
    InvalidRecord (naming the record) if a field does not fit the wide layout either.
    """
    batch: EncodedBatch = _core.encode_batch(records, compact)
    return batch


def decode_many(
    maps: Sequence[bytes | mmap.mmap],
    paths: Sequence[Path],
    segs: Sequence[int],
    offsets: Sequence[int],
) -> list[TimerRecord]:
    """Check and decode the records at ``maps[segs[i]][offsets[i]]``, in that order.

    Any damage raises IntegrityError naming the file and offset.
    """
    out: list[TimerRecord] = _core.decode_many(maps, paths, segs, offsets)
    return out


def encode_headers(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    """The header block of one record."""
    block: bytes = _core.encode_headers(headers)
    return block


def decode(buf: bytes | mmap.mmap, offset: int, path: Path) -> TimerRecord:
    """Check and decode the one record at ``offset`` of ``buf``."""
    return decode_many((buf,), (path,), (0,), (offset,))[0]
