"""Commit-log record layouts: the wide one (type 1) and the compact one (type 2).

Every record starts with the same 8-byte prefix and a type byte; the type says which
layout the fields after it have. Little-endian::

    offset size field
     0      4   length          total record length in bytes, this field included
     4      4   crc             CRC-32 of bytes 8..length (everything after this field)
     8      1   type            RecordType

    WIDE (1), 52 fixed bytes; every record of a version-1 commit log, and any record
    the compact layout cannot hold:
     9      1   reserved        0
    10      2   id_len          bytes of the UTF-8 delay-id
    12      2   topic_len       bytes of the UTF-8 target topic
    14      2   header_count    number of headers
    16      8   due_ms          absolute due time, epoch ms
    24      8   source_offset   offset in the delay-topic partition
    32      8   source_ts_ms    the delay-topic record's timestamp
    40      4   target_partition  -1 = producer's partitioner decides
    44      4   key_len         -1 = null key
    48      4   value_len       -1 = null value (tombstone)
    52      .   id, topic, key, value, then the headers

    COMPACT (2), 33 fixed bytes; written by format version 2 when every field fits:
     9      1   flags           1 = null key, 2 = null value
    10      1   id_len          (<= 255)
    11      1   topic_len       (<= 255; Kafka topic names are <= 249)
    12      1   header_count    (<= 255)
    13      2   key_len         (<= 65,535; 0 for a null key)
    15      2   target_partition  int16, -1 = producer's partitioner decides
    17      4   delay_ms        int32: due_ms - source_ts_ms (within +-24.8 days)
    21      8   due_ms          absolute due time, epoch ms
    29      4   source_offset   uint32 (a partition past 2**32 records: wide records)
    33      .   id, topic, key, the headers, then the value: the rest of the record
                (its length is implied; a null value has flag 2 and no bytes)

    a header: name_len u16, value_len i32 (-1 = null), name, value

The CRC does not cover the length field itself; a damaged length is still caught,
because the CRC of the wrong byte range fails (or the length runs past the end).
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING

from delaybridge.errors import IntegrityError

if TYPE_CHECKING:  # numpy is not needed to encode
    import numpy as np
    import numpy.typing as npt

PREFIX = struct.Struct(
    "<"
    "I"  # length: whole record, bytes
    "I"  # crc: CRC-32 of bytes 8..length
)
FIELDS = struct.Struct(
    "<"
    "B"  # type: RecordType.WIDE
    "x"  # reserved
    "H"  # id_len
    "H"  # topic_len
    "H"  # header_count
    "q"  # due_ms
    "q"  # source_offset
    "q"  # source_ts_ms
    "i"  # target_partition
    "i"  # key_len, -1 = None
    "i"  # value_len, -1 = None
)
COMPACT = struct.Struct(
    "<"
    "B"  # type: RecordType.COMPACT
    "B"  # flags: NULL_KEY | NULL_VALUE
    "B"  # id_len
    "B"  # topic_len
    "B"  # header_count
    "H"  # key_len (0 for a null key)
    "h"  # target_partition
    "i"  # delay_ms: due_ms - source_ts_ms
    "q"  # due_ms
    "I"  # source_offset
)
HEADER_ITEM = struct.Struct(
    "<"
    "H"  # name_len
    "i"  # value_len, -1 = None
)
FIXED_SIZE = PREFIX.size + FIELDS.size
COMPACT_SIZE = PREFIX.size + COMPACT.size
MIN_SIZE = COMPACT_SIZE
"""The shortest record of any layout."""
assert PREFIX.size == 8 and FIELDS.size == 44 and FIXED_SIZE == 52 and COMPACT_SIZE == 33
NULL_KEY = 1
NULL_VALUE = 2
MAX_ID_BYTES = 0xFFFF
Buffer = bytes | memoryview | mmap.mmap
_Q = struct.Struct("<q")
_U32 = struct.Struct("<I")


class RecordType(IntEnum):
    """On-disk record tags of the commit log: which layout follows the prefix."""

    WIDE = 1
    COMPACT = 2
    MESSAGE = 1
    """The name of the wide layout before there were two (an alias of WIDE)."""


def record_length(buf: Buffer, offset: int) -> int:
    """The length field of the record at ``offset`` of ``buf`` (no checks)."""
    length: int = PREFIX.unpack_from(buf, offset)[0]
    return length


def check(buf: Buffer, offset: int, limit: int, path: Path, file_offset: int) -> int:
    """Verify the record at ``offset``; returns its length or raises IntegrityError."""
    if offset + MIN_SIZE > limit:
        raise IntegrityError(f"{path}: offset {file_offset}: record header runs past the end")
    length, crc = PREFIX.unpack_from(buf, offset)
    if length < MIN_SIZE or offset + length > limit:
        raise IntegrityError(f"{path}: offset {file_offset}: bad record length {length}")
    if zlib.crc32(buf[offset + 8 : offset + length]) != crc:
        raise IntegrityError(f"{path}: offset {file_offset}: record CRC mismatch")
    if buf[offset + 8] not in (RecordType.WIDE, RecordType.COMPACT):
        raise IntegrityError(f"{path}: offset {file_offset}: unknown record type {buf[offset + 8]}")
    return int(length)


def due_of(raw: Buffer, offset: int = 0) -> int:
    """``due_ms`` of the (checked) record at ``offset`` of ``raw``, of either layout."""
    due: int = _Q.unpack_from(raw, offset + (21 if raw[offset + 8] == RecordType.COMPACT else 16))[
        0
    ]
    return due


def source_offset_of(raw: Buffer, offset: int = 0) -> int:
    """``source_offset`` of the record at ``offset`` of ``raw``, of either layout."""
    if raw[offset + 8] == RecordType.COMPACT:
        offset_u32: int = _U32.unpack_from(raw, offset + 29)[0]
        return offset_u32
    value: int = _Q.unpack_from(raw, offset + 24)[0]
    return value


@dataclass(slots=True)
class EncodedBatch:
    """A batch ready to write, plus what the store needs to index it."""

    parts: Sequence[bytes | memoryview]
    """Encoded records (prefix, body, prefix, body, ...; or whole records, as in
    ``raw_records``): join and write once."""
    sizes: list[int]
    id_hashes: list[int]
    """CRC-32 of each id (the timer log's cancel/lookup filter)."""
    due_ms: list[int]
    topics: list[str]
    max_source_offset: int
    positions: npt.NDArray[np.int64] | None = None
    """Each record's commit-log position, once a store has appended the batch."""

    def records(self) -> list[bytes]:
        """Each record, whole (its prefix and body), as written."""
        parts = self.parts
        if len(parts) == len(self.sizes):  # already whole (see raw_records)
            return [bytes(p) for p in parts]
        return [bytes(parts[i]) + bytes(parts[i + 1]) for i in range(0, len(parts), 2)]
