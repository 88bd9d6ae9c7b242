"""Commit-log record format: the sidecar's own copy of one accepted message.

One variable-length record per message, shared by the writer, the reader and
recovery. Layout (little-endian)::

    offset size field
     0      4   length          total record length in bytes, this field included
     4      4   crc             CRC-32 of bytes 8..length (everything after this field)
     8      1   type            RecordType.MESSAGE
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
    52      .   id, topic, key, value, then per header:
                name_len u16, value_len i32 (-1 = null), name, value

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

from delaybridge.errors import IntegrityError
from delaybridge.timerlog.errors import InvalidRecord
from delaybridge.timerlog.records import Headers, TimerRecord

PREFIX = struct.Struct(
    "<"
    "I"  # length: whole record, bytes
    "I"  # crc: CRC-32 of bytes 8..length
)
FIELDS = struct.Struct(
    "<"
    "B"  # type: RecordType
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
HEADER_ITEM = struct.Struct(
    "<"
    "H"  # name_len
    "i"  # value_len, -1 = None
)
FIXED_SIZE = PREFIX.size + FIELDS.size
assert PREFIX.size == 8 and FIELDS.size == 44 and FIXED_SIZE == 52
MAX_ID_BYTES = 0xFFFF
_new = tuple.__new__  # builds the named tuple without its Python-level __new__
Buffer = bytes | memoryview | mmap.mmap


class RecordType(IntEnum):
    """On-disk record tags of the commit log."""

    MESSAGE = 1


def encode_headers(headers: Headers) -> bytes:
    """The header block of one record."""
    out = []
    for name, value in headers:
        nb = name.encode()
        if value is None:
            out.append(HEADER_ITEM.pack(len(nb), -1) + nb)
        else:
            out.append(HEADER_ITEM.pack(len(nb), len(value)) + nb + value)
    return b"".join(out)


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

    def records(self) -> list[bytes]:
        """Each record, whole (its prefix and body), as written."""
        parts = self.parts
        if len(parts) == len(self.sizes):  # already whole (see raw_records)
            return [bytes(p) for p in parts]
        return [bytes(parts[i]) + bytes(parts[i + 1]) for i in range(0, len(parts), 2)]


_topic_bytes: dict[str, bytes] = {}


def _encode_topic(topic: str) -> bytes:
    if len(_topic_bytes) > 10_000:  # topics are few; this only guards against abuse
        _topic_bytes.clear()
    tb = _topic_bytes[topic] = topic.encode()
    return tb


def encode_batch(records: Sequence[TimerRecord]) -> EncodedBatch:
    """Encode records: one ``pack``, one join and two CRCs per record, nothing more.

    Raises InvalidRecord (naming the record) if a field does not fit its format.
    """
    pack_fields = FIELDS.pack
    pack_prefix = PREFIX.pack
    crc32 = zlib.crc32
    join = b"".join
    topic_bytes = _topic_bytes
    message = int(RecordType.MESSAGE)
    out: list[bytes] = []
    sizes: list[int] = []
    hashes: list[int] = []
    dues: list[int] = []
    topics: list[str] = []
    push, push_size, push_hash = out.append, sizes.append, hashes.append
    push_due, push_topic = dues.append, topics.append
    max_offset = -1
    try:  # costs nothing until it catches
        for rid, due_ms, topic, partition, key, value, headers, offset, ts in records:
            idb = rid.encode()
            tb = topic_bytes.get(topic) or _encode_topic(topic)
            body = join(
                (
                    pack_fields(
                        message,
                        len(idb),
                        len(tb),
                        len(headers),
                        due_ms,
                        offset,
                        ts,
                        partition,
                        -1 if key is None else len(key),
                        -1 if value is None else len(value),
                    ),
                    idb,
                    tb,
                    key or b"",
                    value or b"",
                    encode_headers(headers) if headers else b"",
                )
            )
            size = len(body) + 8
            push(pack_prefix(size, crc32(body)))
            push(body)
            push_size(size)
            push_hash(crc32(idb))
            push_due(due_ms)
            push_topic(topic)
            if offset > max_offset:
                max_offset = offset
    except (struct.error, OverflowError, AttributeError, TypeError, ValueError) as exc:
        bad = records[len(sizes)]
        raise InvalidRecord(
            f"record {bad.id!r} (source offset {bad.source_offset}) cannot be stored: {exc}"
        ) from exc
    return EncodedBatch(out, sizes, hashes, dues, topics, max_offset)


def record_length(buf: Buffer, offset: int) -> int:
    """The length field of the record at ``offset`` of ``buf`` (no checks)."""
    length: int = PREFIX.unpack_from(buf, offset)[0]
    return length


def check(buf: Buffer, offset: int, limit: int, path: Path, file_offset: int) -> int:
    """Verify the record at ``offset``; returns its length or raises IntegrityError."""
    if offset + FIXED_SIZE > limit:
        raise IntegrityError(f"{path}: offset {file_offset}: record header runs past the end")
    length, crc = PREFIX.unpack_from(buf, offset)
    if length < FIXED_SIZE or offset + length > limit:
        raise IntegrityError(f"{path}: offset {file_offset}: bad record length {length}")
    if zlib.crc32(buf[offset + 8 : offset + length]) != crc:
        raise IntegrityError(f"{path}: offset {file_offset}: record CRC mismatch")
    return int(length)


_unpack_fields = FIELDS.unpack_from
_FIELDS_SIZE = FIELDS.size
assert _FIELDS_SIZE + PREFIX.size == FIXED_SIZE
_MESSAGE = int(RecordType.MESSAGE)
_topic_names: dict[bytes, str] = {}


def decode_many(
    maps: Sequence[bytes | mmap.mmap],
    paths: Sequence[Path],
    segs: Sequence[int],
    offsets: Sequence[int],
) -> list[TimerRecord]:
    """Check and decode the records at ``maps[segs[i]][offsets[i]]``, in that order.

    The one decoder of the format (delivery reads thousands per call, so the loop is
    written out flat). Any damage raises IntegrityError naming the file and offset.
    """
    out: list[TimerRecord] = []
    add = out.append
    unpack_prefix, unpack_fields, crc32, new = PREFIX.unpack_from, _unpack_fields, zlib.crc32, _new
    topic_names = _topic_names
    fs, message = _FIELDS_SIZE, _MESSAGE
    for s, off in zip(segs, offsets, strict=True):
        mm = maps[s]
        try:
            length, crc = unpack_prefix(mm, off)
            body = mm[off + 8 : off + length]
            if crc32(body) != crc or length < FIXED_SIZE:
                check(mm, off, len(mm), paths[s], off)  # raises, with the reason
            (
                kind,
                id_len,
                topic_len,
                n_headers,
                due_ms,
                source_offset,
                source_ts,
                partition,
                key_len,
                value_len,
            ) = unpack_fields(body)
            if kind != message:
                raise IntegrityError(f"{paths[s]}: offset {off}: unknown record type {kind}")
            o = fs + id_len
            rid = body[fs:o].decode()
            tb = body[o : o + topic_len]
            topic = topic_names.get(tb)
            if topic is None:
                if len(topic_names) > 10_000:
                    topic_names.clear()
                topic = topic_names[tb] = tb.decode()
            o += topic_len
            key = None
            if key_len >= 0:
                key = body[o : o + key_len]
                o += key_len
            value = None
            if value_len >= 0:
                value = body[o : o + value_len]
                o += value_len
            headers: Headers = _decode_headers(body, o, n_headers) if n_headers else ()
        except (struct.error, UnicodeDecodeError) as exc:
            raise IntegrityError(f"{paths[s]}: offset {off}: malformed record: {exc}") from exc
        add(
            new(
                TimerRecord,
                (rid, due_ms, topic, partition, key, value, headers, source_offset, source_ts),
            )
        )
    return out


def decode(buf: bytes | mmap.mmap, offset: int, path: Path) -> TimerRecord:
    """Check and decode the one record at ``offset`` of ``buf``."""
    return decode_many((buf,), (path,), (0,), (offset,))[0]


def _decode_headers(body: bytes, o: int, n_headers: int) -> Headers:
    items: list[tuple[str, bytes | None]] = []
    unpack_item = HEADER_ITEM.unpack_from
    for _ in range(n_headers):
        name_len, hv_len = unpack_item(body, o)
        o += HEADER_ITEM.size
        name = body[o : o + name_len].decode()
        o += name_len
        if hv_len < 0:
            items.append((name, None))
        else:
            items.append((name, body[o : o + hv_len]))
            o += hv_len
    return tuple(items)
