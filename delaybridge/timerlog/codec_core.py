"""The commit-log record codec's loops: encode a batch, decode records for delivery.

``timerlog/commit_codec.py`` is the module to import (it documents the layouts, drawn
in ``commit_format``); this one holds the per-record loops so that they can also be
compiled with mypyc (``delaybridge/tools/build_compiled.py``, ``delaybridge/hotpath.py``):
the same source runs interpreted or compiled, and a compiled copy that does not match
this file byte for byte is never used. Keep it compilable: typed functions only; any
edit here needs a rebuild (``scripts/bootstrap`` does it) before the compiled path is used.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

from delaybridge.errors import IntegrityError
from delaybridge.timerlog.commit_format import (
    COMPACT,
    FIELDS,
    FIXED_SIZE,
    HEADER_ITEM,
    MIN_SIZE,
    PREFIX,
    EncodedBatch,
    RecordType,
    check,
)
from delaybridge.timerlog.errors import InvalidRecord
from delaybridge.timerlog.records import Headers, TimerRecord

_new = tuple.__new__  # builds the named tuple without its Python-level __new__


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


_topic_bytes: dict[str, bytes] = {}


def _encode_topic(topic: str) -> bytes:
    if len(_topic_bytes) > 10_000:  # topics are few; this only guards against abuse
        _topic_bytes.clear()
    tb = _topic_bytes[topic] = topic.encode()
    return tb


def _wide_only(*fields: object) -> bytes:
    raise struct.error("the wide layout was asked for")


def encode_batch(records: Sequence[TimerRecord], compact: bool = True) -> EncodedBatch:
    """Encode records: one ``pack``, one join and two CRCs per record, nothing more.

    Compact layout where the record fits it (unless ``compact`` is false: the wide
    layout of format version 1, for tests and fixtures), wide otherwise. Raises
    InvalidRecord (naming the record) if a field does not fit the wide layout either.
    """
    pack_fields = FIELDS.pack
    pack_compact = COMPACT.pack if compact else _wide_only
    pack_prefix = PREFIX.pack
    crc32 = zlib.crc32
    join = b"".join
    topic_bytes = _topic_bytes
    wide, short = int(RecordType.WIDE), int(RecordType.COMPACT)
    struct_error = struct.error
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
                            (1 if key is None else 0) + (2 if value is None else 0),
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
                        pack_fields(
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
            size = len(body) + 8
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


_unpack_fields = FIELDS.unpack_from
_unpack_compact = COMPACT.unpack_from
_FIELDS_SIZE = FIELDS.size
_COMPACT_FIELDS = COMPACT.size
assert _FIELDS_SIZE + PREFIX.size == FIXED_SIZE
_WIDE = int(RecordType.WIDE)
_COMPACT = int(RecordType.COMPACT)
_topic_names: dict[bytes, str] = {}


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
    crc32 = zlib.crc32
    new = _new
    unpack_fields = _unpack_fields
    unpack_compact = _unpack_compact
    topic_names = _topic_names
    fs = _FIELDS_SIZE
    cs = _COMPACT_FIELDS
    wide = _WIDE
    short = _COMPACT
    for s, off in zip(segs, offsets, strict=True):
        mm = maps[s]
        try:
            length, crc = unpack_prefix(mm, off)
            body = mm[off + 8 : off + length]
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
                ) = unpack_fields(body)
                o = fs + id_len
                rid = body[fs:o].decode()
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


def _topic_name(raw: bytes) -> str:
    if len(_topic_names) > 10_000:  # topics are few; this only guards against abuse
        _topic_names.clear()
    name = _topic_names[raw] = raw.decode()
    return name
