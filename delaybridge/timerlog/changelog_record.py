"""The changelog record: one Kafka record per stored message, so a store can be rebuilt.

Each delay-topic partition's store has a changelog partition (same number, compacted
topic). Every message the store takes is written there; when it leaves the store
(delivered, dead-lettered, cancelled, replaced) its key gets a tombstone, so compaction
keeps exactly the pending messages. Format, version 2 (version 1 values are read too:
the same envelope, holding only wide records)::

    key    12 bytes  source_offset  int64 big-endian  the message's delay-topic offset
                     generation     uint32 big-endian 0; +1 each time the message is
                                                     stored again (a parked retry)
           16 bytes  the same with a uint64 generation, when it is 2^32 or more: occurrence
                     k >= 2 of a recurring schedule adds (k - 1) << 32 (contract/series.py);
                     every other message keeps the 12-byte key
    value  1 byte    version        2 (1: written before the compact record layout)
           .         record         the commit-log record, byte for byte (its own
                                    length, CRC, type and fields: commit_record; a
                                    version-2 value may hold either layout)
    tombstone: the same key, a null value, header ``delay-id`` (the message's id: a
               store finds the entry to drop by it)

    progress:  key ``progress`` (8 bytes: never a message key), value the owner's
               delivery cursor tick, int64 big-endian: every message due at or before it
               was delivered (or moved on); a warm standby drops those from its copy

Keys sort like (offset, generation), so a key identifies one stored copy of one
message for the life of the topic: a key is written at most once with a value and at
most once with a tombstone, and compaction never has to choose between two values.
"""

from __future__ import annotations

import struct

from delaybridge.errors import IntegrityError

KEY = struct.Struct(
    ">"
    "q"  # source_offset: the message's offset in its delay-topic partition
    "I"  # generation: which stored copy of it (0 first, +1 per re-store)
)
assert KEY.size == 12
KEY_WIDE = struct.Struct(
    ">"
    "q"  # source_offset: the message's offset in its delay-topic partition
    "Q"  # generation: 2^32 or more (a series' later occurrence)
)
assert KEY_WIDE.size == 16
VERSION = 2
READ_VERSIONS = (1, 2)
"""Version 1 values hold wide records only; a build before version 2 refuses a version-2
value by its version byte instead of misreading a compact record."""
_VERSION_BYTE = bytes([VERSION])
ID_HEADER = "delay-id"


PROGRESS_KEY = b"progress"
PROGRESS = struct.Struct(
    ">q"  # tick_ms: the owner's delivery cursor tick
)
assert len(PROGRESS_KEY) not in (KEY.size, KEY_WIDE.size)


def key_of(source_offset: int, generation: int = 0) -> bytes:
    if generation >> 32:
        return KEY_WIDE.pack(source_offset, generation)
    return KEY.pack(source_offset, generation)


def parse_key(key: bytes | None, where: str) -> tuple[int, int]:
    """(source offset, generation) of a changelog key; IntegrityError names ``where``."""
    if key is not None and len(key) == KEY_WIDE.size:
        offset, generation = KEY_WIDE.unpack(key)
        return int(offset), int(generation)
    if key is None or len(key) != KEY.size:
        raise IntegrityError(
            f"{where}: changelog key of {len(key or b'')} bytes, expected 12 or 16"
        )
    offset, generation = KEY.unpack(key)
    return int(offset), int(generation)


def value_of(record: bytes) -> bytes:
    """The changelog value of an encoded commit-log record."""
    return _VERSION_BYTE + record


def record_of(value: bytes, where: str) -> memoryview:
    """The commit-log record inside a changelog value (no copy)."""
    if not value or value[0] not in READ_VERSIONS:
        got = value[0] if value else "none"
        raise IntegrityError(
            f"{where}: changelog value version {got}, expected one of {READ_VERSIONS}"
        )
    return memoryview(value)[1:]
