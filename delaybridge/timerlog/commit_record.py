"""The commit-log record: its two layouts, and the one codec that writes and reads them.

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

One codec for the writer, the reader and recovery: :func:`encode_batch` writes the
compact layout for every record whose fields fit it (ids and topics <= 255 bytes, keys
<= 64 KiB, a partition < 32,768, a delay within +-24.8 days of the source timestamp, an
offset below 2**32) and the wide one otherwise; :func:`decode_many` reads both, for
delivery; :func:`index_encoded` takes records that arrive encoded (a changelog's values)
without decoding them; :func:`check`, :func:`due_of` and :func:`source_offset_of` serve
recovery, rolls and the ROLLED sort, one record at a time.

The hot path: this module is compiled with mypyc (``delaybridge/tools/build_compiled.py``)
into a copy that :mod:`~delaybridge.timerlog.commit_codec` runs instead of this source
when the copy was built from this file exactly (``delaybridge/hotpath.py``). So call the
per-batch functions through ``commit_codec``; keep this module compilable (typed
functions, no classes of its own but :class:`RecordType`); any edit needs a rebuild
(``scripts/bootstrap`` does it) before the compiled copy is used again.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Sequence
from enum import IntEnum
from pathlib import Path

from delaybridge.errors import IntegrityError
from delaybridge.timerlog.errors import InvalidRecord
from delaybridge.timerlog.records import EncodedBatch, Headers, TimerRecord

PREFIX = struct.Struct(
    "<"
    "I"  # length: whole record, bytes
    "I"  # crc: CRC-32 of bytes 8..length
)
WIDE = struct.Struct(
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
WIDE_SIZE = PREFIX.size + WIDE.size
"""Bytes of a wide record before its id."""
COMPACT_SIZE = PREFIX.size + COMPACT.size
"""Bytes of a compact record before its id."""
MIN_SIZE = COMPACT_SIZE
"""The shortest record of any layout."""
assert PREFIX.size == 8 and WIDE_SIZE == 52 and COMPACT_SIZE == 33 and HEADER_ITEM.size == 6

TYPE_AT = PREFIX.size
"""Where the type byte is, from the record's start."""
WIDE_DUE_AT = PREFIX.size + struct.calcsize("<BxHHH")
"""Where a wide record's ``due_ms`` is: after type, reserved and the three counts."""
WIDE_SOURCE_OFFSET_AT = WIDE_DUE_AT + struct.calcsize("<q")
COMPACT_DUE_AT = PREFIX.size + struct.calcsize("<BBBBBHhi")
"""Where a compact record's ``due_ms`` is: after type, flags, the counts, key_len,
target_partition and delay_ms."""
COMPACT_SOURCE_OFFSET_AT = COMPACT_DUE_AT + struct.calcsize("<q")
assert (WIDE_DUE_AT, WIDE_SOURCE_OFFSET_AT, COMPACT_DUE_AT, COMPACT_SOURCE_OFFSET_AT) == (
    16,
    24,
    21,
    29,
)

NULL_KEY = 1
"""Compact flag: the key is null (``key_len`` is 0)."""
NULL_VALUE = 2
"""Compact flag: the value is null (no bytes follow the headers)."""
Buffer = bytes | memoryview | mmap.mmap
_Q = struct.Struct("<q")
_U32 = struct.Struct("<I")


class RecordType(IntEnum):
    """On-disk record tags of the commit log: which layout follows the prefix."""

    WIDE = 1
    COMPACT = 2
    MESSAGE = 1
    """The name of the wide layout before there were two (an alias of WIDE)."""


# -- one record at a time: recovery, rolls, the ROLLED sort, quarantine ----------------


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
    if zlib.crc32(buf[offset + PREFIX.size : offset + length]) != crc:
        raise IntegrityError(f"{path}: offset {file_offset}: record CRC mismatch")
    kind = buf[offset + TYPE_AT]
    if kind not in (RecordType.WIDE, RecordType.COMPACT):
        raise IntegrityError(f"{path}: offset {file_offset}: unknown record type {kind}")
    return int(length)


def due_of(raw: Buffer, offset: int = 0) -> int:
    """``due_ms`` of the (checked) record at ``offset`` of ``raw``, of either layout."""
    compact = raw[offset + TYPE_AT] == RecordType.COMPACT
    due: int = _Q.unpack_from(raw, offset + (COMPACT_DUE_AT if compact else WIDE_DUE_AT))[0]
    return due


def source_offset_of(raw: Buffer, offset: int = 0) -> int:
    """``source_offset`` of the record at ``offset`` of ``raw``, of either layout."""
    if raw[offset + TYPE_AT] == RecordType.COMPACT:
        offset_u32: int = _U32.unpack_from(raw, offset + COMPACT_SOURCE_OFFSET_AT)[0]
        return offset_u32
    value: int = _Q.unpack_from(raw, offset + WIDE_SOURCE_OFFSET_AT)[0]
    return value


# -- headers ---------------------------------------------------------------------------


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


def decode_headers(body: bytes, o: int, n_headers: int) -> tuple[Headers, int]:
    """The ``n_headers`` headers at ``o`` of ``body``, and the offset after them."""
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
    return tuple(items), o


# -- batches: the per-record loops of appends, deliveries and restores ------------------

_new = tuple.__new__  # builds the named tuple without its Python-level __new__
_topic_bytes: dict[str, bytes] = {}
_topic_names: dict[bytes, str] = {}


def _encode_topic(topic: str) -> bytes:
    if len(_topic_bytes) > 10_000:  # topics are few; this only guards against abuse
        _topic_bytes.clear()
    tb = _topic_bytes[topic] = topic.encode()
    return tb


def _topic_name(raw: bytes) -> str:
    if len(_topic_names) > 10_000:  # topics are few; this only guards against abuse
        _topic_names.clear()
    name = _topic_names[raw] = raw.decode()
    return name


def _wide_only(*fields: object) -> bytes:
    raise struct.error("the wide layout was asked for")


def encode_batch(records: Sequence[TimerRecord], compact: bool = True) -> EncodedBatch:
    """Encode records: one ``pack``, one join and two CRCs per record, nothing more.

    Compact layout where the record fits it (unless ``compact`` is false: the wide
    layout of format version 1, for tests and fixtures), wide otherwise. Raises
    InvalidRecord (naming the record) if a field does not fit the wide layout either.
    """
    pack_wide = WIDE.pack
    pack_compact = COMPACT.pack if compact else _wide_only
    pack_prefix = PREFIX.pack
    crc32 = zlib.crc32
    join = b"".join
    topic_bytes = _topic_bytes
    wide, short = int(RecordType.WIDE), int(RecordType.COMPACT)
    struct_error = struct.error
    ps = PREFIX.size
    out: list[bytes] = []
    sizes: list[int] = []
    hashes: list[int] = []
    dues: list[int] = []
    topics: list[str] = []
    push = out.append
    push_size = sizes.append
    push_hash = hashes.append
    push_due = dues.append
    push_topic = topics.append
    max_offset = -1
    try:  # costs nothing until it catches
        for rid, due_ms, topic, partition, key, value, headers, offset, ts in records:
            idb = rid.encode()
            tb = topic_bytes.get(topic) or _encode_topic(topic)
            hb = encode_headers(headers) if headers else b""
            try:  # the compact layout; a field that does not fit it: the wide one
                body = join(
                    (
                        pack_compact(
                            short,
                            (1 if key is None else 0) + (2 if value is None else 0),  # flags
                            len(idb),
                            len(tb),
                            len(headers),
                            len(key) if key else 0,
                            partition,
                            due_ms - ts,
                            due_ms,
                            offset,
                        ),
                        idb,
                        tb,
                        key or b"",
                        hb,
                        value or b"",
                    )
                )
            except struct_error:
                body = join(
                    (
                        pack_wide(
                            wide,
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
                        hb,
                    )
                )
            size = len(body) + ps
            push(pack_prefix(size, crc32(body)))
            push(body)
            push_size(size)
            push_hash(crc32(idb))
            push_due(due_ms)
            push_topic(topic)
            if offset > max_offset:
                max_offset = offset
    except (struct_error, OverflowError, AttributeError, TypeError, ValueError) as exc:
        bad = records[len(sizes)]
        raise InvalidRecord(
            f"record {bad.id!r} (source offset {bad.source_offset}) cannot be stored: {exc}"
        ) from exc
    return EncodedBatch(out, sizes, hashes, dues, topics, max_offset)


def decode_many(
    maps: Sequence[bytes | mmap.mmap],
    paths: Sequence[Path],
    segs: Sequence[int],
    offsets: Sequence[int],
) -> list[TimerRecord]:
    """Check and decode the records at ``maps[segs[i]][offsets[i]]``, in that order.

    The one decoder of both layouts (delivery reads thousands per call, so the loop is
    written out flat). Any damage raises IntegrityError naming the file and offset.
    """
    out: list[TimerRecord] = []
    add = out.append
    unpack_prefix = PREFIX.unpack_from
    unpack_wide = WIDE.unpack_from
    unpack_compact = COMPACT.unpack_from
    crc32 = zlib.crc32
    new = _new
    topic_names = _topic_names
    ps = PREFIX.size
    ws = WIDE.size
    cs = COMPACT.size
    wide = int(RecordType.WIDE)
    short = int(RecordType.COMPACT)
    for s, off in zip(segs, offsets, strict=True):
        mm = maps[s]
        try:
            length, crc = unpack_prefix(mm, off)
            body = mm[off + ps : off + length]
            if crc32(body) != crc or length < MIN_SIZE:
                check(mm, off, len(mm), paths[s], off)  # raises, with the reason
            kind = body[0]
            if kind == short:
                (
                    _,
                    flags,
                    id_len,
                    topic_len,
                    n_headers,
                    key_len,
                    partition,
                    delay,
                    due_ms,
                    source_offset,
                ) = unpack_compact(body)
                o = cs + id_len
                rid = body[cs:o].decode()
                e = o + topic_len
                tb = body[o:e]
                topic = topic_names.get(tb) or _topic_name(tb)
                o = e + key_len
                key = None if flags & 1 else body[e:o]  # 1: NULL_KEY
                headers: Headers = ()
                if n_headers:
                    headers, o = decode_headers(body, o, n_headers)
                if o > len(body):
                    raise struct.error(f"fields run {o - len(body)} bytes past the record")
                value = None if flags & 2 else body[o:]  # 2: NULL_VALUE
                source_ts = due_ms - delay
            elif kind != wide:
                raise IntegrityError(f"{paths[s]}: offset {off}: unknown record type {kind}")
            else:
                (
                    _,
                    id_len,
                    topic_len,
                    n_headers,
                    due_ms,
                    source_offset,
                    source_ts,
                    partition,
                    key_len,
                    value_len,
                ) = unpack_wide(body)
                o = ws + id_len
                rid = body[ws:o].decode()
                e = o + topic_len
                tb = body[o:e]
                topic = topic_names.get(tb) or _topic_name(tb)
                o = e
                key = None
                if key_len >= 0:
                    key = body[o : o + key_len]
                    o += key_len
                value = None
                if value_len >= 0:
                    value = body[o : o + value_len]
                    o += value_len
                headers = decode_headers(body, o, n_headers)[0] if n_headers else ()
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


def index_encoded(raws: Sequence[bytes], where: str, skip: int = 0) -> EncodedBatch:
    """Records that arrive encoded, as a batch the store appends like one it encoded.

    A changelog value carries a commit-log record byte for byte (:mod:`changelog_record`),
    so a restore need not decode and re-encode it: each record of ``raws`` starts
    ``skip`` bytes into its buffer (a changelog value's version byte); its length and
    type are checked and the few fields the store indexes it by are read at their fixed
    offsets -- about a third of the work of decode-then-encode, which is what makes a
    restore of a million records take seconds. IntegrityError names ``where`` and the
    record's place in the batch when one cannot be a record (its length, type).

    The CRC is not checked here: it is when the record is read for delivery, as for
    every record (a damaged one is quarantined then), and Kafka checked its own CRC on
    the way in.
    """
    parts: list[bytes | memoryview] = []
    sizes: list[int] = []
    hashes: list[int] = []
    dues: list[int] = []
    topics: list[str] = []
    max_offset = -1
    unpack_prefix = PREFIX.unpack_from
    unpack_wide = WIDE.unpack_from
    unpack_compact = COMPACT.unpack_from
    crc32 = zlib.crc32
    wide = int(RecordType.WIDE)
    short = int(RecordType.COMPACT)
    type_at = TYPE_AT
    names: dict[bytes, str] = {}
    for i, data in enumerate(raws):
        length = unpack_prefix(data, skip)[0]
        if length != len(data) - skip or length < MIN_SIZE:
            raise IntegrityError(f"{where}: record {i}: bad length {length}")
        kind = data[skip + type_at]
        if kind == short:
            (_, _f, id_len, topic_len, _n, _k, _p, _delay, due_ms, source_offset) = unpack_compact(
                data, skip + type_at
            )
            o = skip + COMPACT_SIZE
        elif kind == wide and length >= WIDE_SIZE:
            _, id_len, topic_len, _n, due_ms, source_offset, *_ = unpack_wide(data, skip + type_at)
            o = skip + WIDE_SIZE
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
