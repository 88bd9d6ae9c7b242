"""Records that arrive already encoded: a store restored from its changelog.

A changelog value carries a commit-log record byte for byte (``changelog_codec``), so a
restore need not decode and re-encode it: :func:`batch_of_raw` checks each record (its
length and CRC) and reads the few fields the store indexes it by, at their fixed
offsets, and returns an :class:`~delaybridge.timerlog.commit_codec.EncodedBatch` the
store appends like one it encoded itself. About a third of the work of
decode-then-encode, which is what makes a restore of a million records take seconds.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from delaybridge.errors import IntegrityError
from delaybridge.timerlog.commit_codec import (
    COMPACT,
    COMPACT_SIZE,
    FIELDS,
    FIXED_SIZE,
    MIN_SIZE,
    PREFIX,
    EncodedBatch,
    RecordType,
)

_WIDE = int(RecordType.WIDE)
_COMPACT = int(RecordType.COMPACT)


def batch_of_raw(raws: Sequence[bytes], where: str, skip: int = 0) -> EncodedBatch:
    """Index encoded records that start ``skip`` bytes into each of ``raws`` (a
    changelog value's version byte); IntegrityError names ``where`` and the record's
    place in the batch when one cannot be a record (its length, type).

    The CRC is not checked here: it is when the record is read for delivery, as for
    every record (a damaged one is quarantined then), and Kafka checked its own CRC on
    the way in."""
    parts: list[bytes | memoryview] = []
    sizes: list[int] = []
    hashes: list[int] = []
    dues: list[int] = []
    topics: list[str] = []
    max_offset = -1
    unpack_prefix = PREFIX.unpack_from
    unpack_fields = FIELDS.unpack_from
    crc32 = zlib.crc32
    unpack_compact = COMPACT.unpack_from
    names: dict[bytes, str] = {}
    for i, data in enumerate(raws):
        length = unpack_prefix(data, skip)[0]
        if length != len(data) - skip or length < MIN_SIZE:
            raise IntegrityError(f"{where}: record {i}: bad length {length}")
        kind = data[skip + 8]
        if kind == _COMPACT:
            (_, _f, id_len, topic_len, _n, _k, _p, _delay, due_ms, source_offset) = unpack_compact(
                data, skip + 8
            )
            o = skip + COMPACT_SIZE
        elif kind == _WIDE and length >= FIXED_SIZE:
            _, id_len, topic_len, _n, due_ms, source_offset, *_ = unpack_fields(data, skip + 8)
            o = skip + FIXED_SIZE
        else:
            raise IntegrityError(f"{where}: record {i}: unknown record type {kind}")
        tb = data[o + id_len : o + id_len + topic_len]
        topic = names.get(tb)
        if topic is None:
            topic = names[tb] = tb.decode()
        parts.append(memoryview(data)[skip:] if skip else data)
        sizes.append(length)
        hashes.append(crc32(data[o : o + id_len]))
        dues.append(due_ms)
        topics.append(topic)
        if source_offset > max_offset:
            max_offset = source_offset
    return EncodedBatch(parts, sizes, hashes, dues, topics, max_offset)
